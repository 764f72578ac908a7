"""Games as envs: legal-move masks in the models, one seat against an opponent, self-play pools."""

import json
import os

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from rl import registry  # noqa: E402
from rl.envs import make_env  # noqa: E402
from rl.games.registered import game_of_env  # noqa: E402
from rl.games.selfplay import PoolOpponent  # noqa: E402
from rl.games.spec import GAMES  # noqa: E402
from rl.games.versus import VersusEnv  # noqa: E402
from rl.hparams.ppo import PPOHParams  # noqa: E402
from rl.models.host import ILLEGAL_SCORE  # noqa: E402

TICTACTOE = GAMES["tictactoe"]
OBS_SIZE = TICTACTOE.num_features + TICTACTOE.num_actions


def scripted(name):
    return lambda spec: registry.players.get(name)(spec)


def observations(rng, count, legal_share=0.5):
    """Random tic-tac-toe observations whose last 9 entries are a non-empty legal mask."""
    obs = rng.integers(0, 2, size=(count, OBS_SIZE)).astype(np.float32)
    masks = rng.random((count, 9)) < legal_share
    masks[np.arange(count), rng.integers(0, 9, count)] = True
    obs[:, -9:] = masks
    return obs


# --- masks in the models ------------------------------------------------------------
@pytest.mark.unit
@pytest.mark.parametrize("model_name", ["actor_critic", "q_network"])
def test_illegal_moves_get_the_illegal_score_in_tensorflow_and_numpy(model_name):
    import tensorflow as tf

    from rl.hparams.dqn import DQNHParams

    space = gym.spaces.Box(0.0, 1.0, (OBS_SIZE,), np.float32)
    actions = gym.spaces.Discrete(9)
    hp = (PPOHParams if model_name == "actor_critic" else DQNHParams)(action_mask=True)
    model = registry.models.get(model_name)(hp, space, actions, seed=0)
    obs = observations(np.random.default_rng(0), 32)
    legal = obs[:, -9:] > 0
    if model_name == "actor_critic":
        scores = model.policy(tf.constant(obs)).logits_parameter().numpy()
        host = model.host_network()(obs, [v.numpy() for v in model.acting_variables()])
        host_scores = host.outputs
    else:
        scores = model(tf.constant(obs)).numpy()
        host_scores = model.host_network()(obs, [v.numpy() for v in model.acting_variables()])
    # Illegal moves sit at ILLEGAL_SCORE (plus a network output far smaller than it).
    assert np.all(scores[~legal] < ILLEGAL_SCORE / 2) and np.all(scores[legal] > ILLEGAL_SCORE / 2)
    np.testing.assert_allclose(host_scores, scores, rtol=1e-5, atol=1e-3)
    # The greedy move is always legal.
    assert legal[np.arange(32), scores.argmax(1)].all()


@pytest.mark.unit
def test_a_masked_policy_gives_illegal_moves_probability_zero_and_finite_entropy():
    import tensorflow as tf

    space = gym.spaces.Box(0.0, 1.0, (OBS_SIZE,), np.float32)
    model = registry.models.get("actor_critic")(
        PPOHParams(action_mask=True), space, gym.spaces.Discrete(9), seed=1
    )
    obs = observations(np.random.default_rng(1), 64)
    policy = model.policy(tf.constant(obs))
    probs = policy.probs_parameter().numpy()
    assert np.all(probs[obs[:, -9:] == 0] == 0.0)
    np.testing.assert_allclose(probs.sum(1), 1.0, rtol=1e-6)
    assert np.all(np.isfinite(policy.entropy().numpy()))
    samples = policy.sample(seed=tf.constant([1, 2])).numpy()
    assert np.all(obs[np.arange(64), -9 + samples] == 1)


@pytest.mark.unit
def test_a_mask_needs_discrete_actions_and_flat_observations_ending_in_a_mask():
    from rl.hparams.dqn import DQNHParams

    box = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    with pytest.raises(ValueError, match="action_mask needs Discrete actions"):
        registry.models.get("actor_critic")(
            PPOHParams(action_mask=True), gym.spaces.Box(0, 1, (20,), np.float32), box, seed=0
        )
    with pytest.raises(ValueError, match="flat observations ending with 9 mask entries"):
        registry.models.get("actor_critic")(
            PPOHParams(action_mask=True),
            gym.spaces.Box(0, 1, (9,), np.float32),
            gym.spaces.Discrete(9),
            seed=0,
        )
    # CartPole's last two features are no mask: taken for one, they would forbid moves.
    cartpole = gym.make("CartPole-v1")
    with pytest.raises(ValueError, match="last 2 entries are a 0/1 legal-move mask"):
        registry.models.get("q_network")(
            DQNHParams(action_mask=True), cartpole.observation_space, cartpole.action_space, 0
        )


# --- one seat of a game --------------------------------------------------------------
def play(env, choose, seed):
    obs, info = env.reset(seed=seed)
    total, moves = 0.0, 0
    while True:
        obs, reward, terminated, truncated, info = env.step(choose(obs))
        total, moves = total + reward, moves + 1
        if terminated or truncated:
            return info, total, moves, terminated


def first_legal(obs):
    return int(np.flatnonzero(obs[-9:])[0])


@pytest.mark.unit
@pytest.mark.parametrize("win_reward, loss_reward", [(1.0, -1.0), (0.1, -10.0)])
def test_first_legal_against_first_legal_is_won_by_whoever_moves_first(win_reward, loss_reward):
    # Both fill the first free cell: X takes 0, 2, 4, 6 and wins on the anti-diagonal
    # 2-4-6 at its fourth move; O has moved three times by then. A win scores
    # win_reward, a loss loss_reward.
    env = make_env(f"tictactoe?loss_reward={loss_reward}&win_reward={win_reward}").unwrapped
    assert isinstance(env, VersusEnv) and env.opponent.name == "random"
    env.opponent = scripted("first_legal")(TICTACTOE)
    env.reset(seed=0)
    first_seat = env._first_seat
    results = []
    for game in range(4):
        obs, info = env.reset() if game else env.reset(seed=0)
        seat = info["seat"]
        total, moves = 0.0, 0
        while True:
            obs, reward, terminated, truncated, info = env.step(first_legal(obs))
            total, moves = total + reward, moves + 1
            if terminated or truncated:
                break
        results.append((seat, total, moves, terminated))
    # Seats alternate from the seeded first one.
    assert [r[0] for r in results] == [(first_seat + g) % 2 for g in range(4)]
    for seat, total, moves, terminated in results:
        assert terminated
        assert (total, moves) == ((win_reward, 4) if seat == 0 else (loss_reward, 3))


@pytest.mark.unit
def test_an_illegal_move_loses_at_once():
    env = VersusEnv("tictactoe", scripted("first_legal"))
    obs, info = env.reset(seed=3)
    taken = int(np.flatnonzero(obs[-9:] == 0)[0]) if (obs[-9:] == 0).any() else None
    if taken is None:  # the learner moves first: make a move, then repeat it
        obs, *_ = env.step(4)
        taken = 4
    obs, reward, terminated, truncated, info = env.step(taken)
    assert (reward, terminated, info) == (-1.0, True, {"illegal_move": True})


@pytest.mark.unit
def test_a_random_opponent_is_beaten_about_as_often_as_it_wins_by_random_play():
    env = VersusEnv("tictactoe", scripted("random"))
    rng = np.random.default_rng(0)
    outcomes = []
    env.reset(seed=0)
    for _ in range(400):
        obs, _ = env.reset()
        while True:
            move = int(rng.choice(np.flatnonzero(obs[-9:])))
            obs, reward, terminated, truncated, info = env.step(move)
            if terminated or truncated:
                outcomes.append(np.sign(reward))
                break
    wins, losses = outcomes.count(1.0), outcomes.count(-1.0)
    # Random against random, seats alternating: 0.44 wins and 0.44 losses in expectation
    # (first mover 0.585, second 0.288); 400 games put both within 0.36-0.52.
    assert 0.36 < wins / 400 < 0.52 and 0.36 < losses / 400 < 0.52


@pytest.mark.unit
def test_game_envs_pass_gymnasiums_checker_and_name_their_game():
    from gymnasium.utils.env_checker import check_env

    from rl.envs import make_env

    for name in ("tictactoe", "connect_four_lookahead", "rps"):
        check_env(make_env(name).unwrapped, skip_render_check=True)
    assert [
        game_of_env(e)
        for e in ("tictactoe_selfplay", "connect_four?win_reward=0.5", "rps", "CartPole-v1")
    ] == [
        "tictactoe",
        "connect_four",
        "rps",
        None,
    ]


# --- self-play pools ---------------------------------------------------------------
def write_artefact(run_dir, step, hp, seed):
    """A policy artefact of ``hp.model`` on tic-tac-toe, as a checkpoint writes it."""
    from rl.policy import write_policy_artefact

    class Agent:  # what write_policy_artefact reads from an agent
        pass

    space = gym.spaces.Box(0.0, 1.0, (OBS_SIZE,), np.float32)
    model = registry.models.get(hp.model)(hp, space, gym.spaces.Discrete(9), seed=seed)
    agent = Agent()
    agent.hp = hp

    class Snapshot:
        version = step
        arrays = tuple(v.numpy() for v in model.acting_variables())

    agent.publish = lambda: Snapshot
    write_policy_artefact(agent, str(run_dir), step, saved_model=False)
    return model


@pytest.mark.unit
def test_an_empty_pool_plays_the_scripted_players_then_past_policies_join(tmp_path):
    opponent = PoolOpponent(TICTACTOE, strategy="latest", run_dir=str(tmp_path))
    rng = np.random.default_rng(0)
    opponent.new_game(rng)
    assert opponent.current.name in ("random", "one_step_lookahead")
    hp = PPOHParams(env="tictactoe_selfplay", action_mask=True, hidden_sizes=(16,))
    write_artefact(tmp_path, 1000, hp, seed=1)
    write_artefact(tmp_path, 2000, hp, seed=2)
    drawn = []
    for _ in range(200):
        opponent.new_game(rng)
        drawn.append(getattr(opponent.current, "step", opponent.current.name))
    # latest: the newest artefact, except for the scripted share (0.5: 100 of 200 expected).
    assert set(drawn) <= {2000, "random", "one_step_lookahead"}
    assert 70 < sum(d != 2000 for d in drawn) < 130
    # An artefact moved aside (a resume from an earlier checkpoint) leaves the pool.
    os.rename(tmp_path / "policies" / "ckpt-2000", tmp_path / "superseded-2000")
    opponent.scripted_share = 0.0
    opponent.new_game(rng)
    assert opponent.current.step == 1000 and [s for s, _, _ in opponent.pool()] == [1000]


@pytest.mark.unit
@pytest.mark.parametrize("member_epsilon", [0.0, 0.2])
def test_q_network_members_move_at_random_with_probability_member_epsilon(tmp_path, member_epsilon):
    from rl.hparams.dqn import DQNHParams

    hp = DQNHParams(env="tictactoe_selfplay", action_mask=True, hidden_sizes=(16,))
    write_artefact(tmp_path, 1, hp, seed=1)
    opponent = PoolOpponent(
        TICTACTOE, scripted_share=0.0, run_dir=str(tmp_path), member_epsilon=member_epsilon
    )
    rng = np.random.default_rng(0)
    opponent.new_game(rng)
    features, mask = np.zeros(TICTACTOE.num_features, np.float32), np.ones(9, bool)
    member = opponent.current
    q_values = member.policy(
        np.concatenate([features, mask])[None].astype(np.float32), member.arrays
    )
    greedy = int(np.argmax(q_values[0]))
    moves = np.array([opponent.act(features, mask, rng) for _ in range(3000)])
    # A random legal move with probability member_epsilon: another than the greedy one
    # in 8 of 9 of those.
    assert np.mean(moves != greedy) == pytest.approx(member_epsilon * 8 / 9, abs=0.03)
    with pytest.raises(Exception, match="member_epsilon must be a number in"):
        make_env("tictactoe_selfplay?member_epsilon=2")


@pytest.mark.unit
def test_prioritised_draws_favour_the_members_that_beat_the_learner(tmp_path):
    hp = PPOHParams(env="tictactoe_selfplay", action_mask=True, hidden_sizes=(16,))
    for step in (1, 2):
        write_artefact(tmp_path, step, hp, seed=step)
    opponent = PoolOpponent(
        TICTACTOE, strategy="prioritised", scripted_share=0.0, run_dir=str(tmp_path)
    )
    rng = np.random.default_rng(0)
    opponent.new_game(rng)
    # The learner beat member 1 in 9 games of 9 and lost to member 2 in 9 of 9:
    # mean scores (9 + 0.5) / 10 = 0.95 and 0.5 / 10 = 0.05, weights 0.0025 and 0.9025.
    for member, score in ((opponent.members[1], 1.0), (opponent.members[2], 0.0)):
        opponent.current = member
        for _ in range(9):
            opponent.game_over(score)
    assert [round(s, 6) for _, s, _ in opponent.pool()] == [0.95, 0.05]
    drawn = []
    for _ in range(2000):
        opponent.new_game(rng)
        drawn.append(opponent.current.step)
    share = drawn.count(1) / len(drawn)
    assert share == pytest.approx(0.0025 / 0.905, abs=0.006)


@pytest.mark.unit
def test_a_pool_member_acts_as_its_artefact_player_and_only_legally(tmp_path):
    from rl.games.artefact import ArtefactPlayer

    hp = PPOHParams(env="tictactoe_selfplay", action_mask=True, hidden_sizes=(16,))
    model = write_artefact(tmp_path, 5, hp, seed=5)
    player = ArtefactPlayer(str(tmp_path / "policies" / "ckpt-5"))
    assert player.name == f"{tmp_path.name}@5"
    obs = observations(np.random.default_rng(2), 50)
    rng = np.random.default_rng(0)
    import tensorflow as tf

    logits = model.policy(tf.constant(obs)).logits_parameter().numpy()
    for row, expected in zip(obs, logits.argmax(1)):
        move = player.act(row[:-9], row[-9:] > 0, rng)
        assert move == expected and row[-9 + move] == 1
    meta = json.loads((tmp_path / "policies" / "ckpt-5" / "policy.json").read_text())
    assert meta["hparams"]["env"] == "tictactoe_selfplay"


# --- tic-tac-toe solved (rl/games/exact.py) -------------------------------------------
@pytest.mark.unit
def test_exact_positions_and_features_are_pettingzoos():
    from rl.games import exact
    from rl.games.spec import features_and_mask, make_game

    # Every position reachable from the empty board: 5,478, the known count.
    seen, frontier = {exact.START}, [exact.START]
    while frontier:
        position = frontier.pop()
        if not exact.is_over(position):
            for move in np.flatnonzero(np.array(position) == 0):
                child = exact.play(position, int(move))
                if child not in seen:
                    seen.add(child)
                    frontier.append(child)
    assert len(seen) == 5478
    # What a player sees agrees with PettingZoo's observation, move by move.
    rng = np.random.default_rng(0)
    for game in range(30):
        env = make_game("tictactoe")
        env.reset(seed=game)
        position = exact.START
        while not (env.terminations[env.agent_selection] or env.truncations[env.agent_selection]):
            features, mask = features_and_mask(TICTACTOE, env.observe(env.agent_selection))
            mine = exact.features_and_mask(position)
            assert np.array_equal(features, mine[0]) and np.array_equal(mask, mine[1])
            assert exact.position_from_features(features) == position
            move = int(rng.choice(np.flatnonzero(mask)))
            env.step(move)
            position = exact.play(position, move)
        assert exact.is_over(position)


@pytest.mark.unit
def test_exact_values_and_the_perfect_player():
    from rl.games import exact

    assert exact.value(exact.START) == 0  # tic-tac-toe is a draw
    # X on 0 and 1, O on 3 and 4, X to move: X wins on 2; O to move after X plays 8 wins on 5.
    position = (1, 1, 0, 2, 2, 0, 0, 0, 0)
    assert exact.value(position) == 1 and exact.best_moves(position) == [2]
    assert exact.value(exact.play(position, 8)) == 1  # O to move, wins on 5
    perfect = registry.players.get("perfect")(TICTACTOE)
    with pytest.raises(ValueError, match="plays tictactoe"):
        registry.players.get("perfect")(GAMES["connect_four"])
    decide = exact.deciding(perfect_first_best())
    for name in ("random", "one_step_lookahead", "perfect"):
        opponent = registry.players.get(name)(TICTACTOE)
        for seat in (0, 1):
            assert exact.exact_results(decide, opponent, seat)[2] == 0.0  # never loses
    assert [exact.losing_lines(decide, seat) for seat in (0, 1)] == [0, 0]
    # Perfect against perfect: always a draw; its first moves are all nine (each draws).
    assert np.allclose(exact.exact_results(decide, perfect, 0), exact.DRAW)
    assert exact.best_moves(exact.START) == list(range(9))


def perfect_first_best():
    """A deterministic perfect player: the lowest-numbered best move."""
    from rl.games import exact

    class FirstBest:
        def act(self, features, mask, rng):
            return exact.best_moves(exact.position_from_features(features))[0]

    return FirstBest()


@pytest.mark.unit
def test_exact_results_by_hand_and_move_probabilities():
    from rl.games import exact

    first_legal = registry.players.get("first_legal")(TICTACTOE)

    class FirstLegalProbabilities:  # first_legal as an opponent with known probabilities
        def move_probabilities(self, features, mask):
            return np.eye(9)[np.flatnonzero(mask)[0]]

    # first_legal against itself: X 0, O 1, X 2, O 3, X 4, O 5, X 6 (the 2-4-6 diagonal).
    decide = exact.deciding(first_legal)
    assert np.array_equal(exact.exact_results(decide, FirstLegalProbabilities(), 0), exact.WIN)
    assert np.array_equal(exact.exact_results(decide, FirstLegalProbabilities(), 1), exact.LOSS)
    # The look-ahead player: win first (one cell), else block (two threats: half each).
    lookahead = registry.players.get("one_step_lookahead")(TICTACTOE)
    can_win = exact.features_and_mask((1, 1, 0, 2, 2, 0, 0, 0, 0))  # X to move wins on 2
    assert np.array_equal(lookahead.move_probabilities(*can_win), np.eye(9)[2])
    forked = exact.features_and_mask((1, 1, 0, 1, 2, 0, 0, 0, 2))  # O to move: X threatens 2, 6
    assert lookahead.move_probabilities(*forked).tolist() == [0, 0, 0.5, 0, 0, 0, 0.5, 0, 0]
    random = registry.players.get("random")(TICTACTOE)
    assert random.move_probabilities(*forked).tolist() == [0, 0, 0.25, 0, 0, 0.25, 0.25, 0.25, 0]
    # first_legal as X against the random player, by hand: X 0; if O avoids 1 and 2
    # (6/8), X 1 and O blocks 2 with 1/6, else X wins; the rest is the tree's.
    result = exact.exact_results(decide, random, 0)
    assert result.sum() == pytest.approx(1.0) and result[0] > 6 / 8 * 5 / 6


@pytest.mark.slow
def test_exact_loss_rates_match_sampled_games_of_an_artefact(tmp_path):
    from rl.games import exact
    from rl.games.artefact import ArtefactPlayer

    hp = PPOHParams(env="tictactoe_selfplay", action_mask=True, hidden_sizes=(16,))
    write_artefact(tmp_path, 7, hp, seed=7)
    player = ArtefactPlayer(str(tmp_path / "policies" / "ckpt-7"))
    expected = exact.exact_results(exact.deciding(player), scripted("random")(TICTACTOE), 0)
    env = VersusEnv("tictactoe", scripted("random"))
    results = []
    obs, _ = env.reset(seed=0)
    while len(results) < 4000:
        obs, reward, terminated, truncated, _ = env.step(player.act(obs[:-9], obs[-9:] > 0, None))
        if terminated or truncated:
            if env.learner == "player_1":  # the learner moved first
                results.append(reward)
            obs, _ = env.reset()
    outcome = np.array(results)
    sampled = np.array([np.mean(outcome > 0), np.mean(outcome == 0), np.mean(outcome < 0)])
    # 4,000 seeded games: within 4 standard errors of the exact probabilities.
    assert np.all(np.abs(sampled - expected) <= 4 * np.sqrt(expected * (1 - expected) / 4000))


@pytest.mark.unit
def test_exact_command_prints_a_row_per_checkpoint_and_refuses_an_empty_run(tmp_path, capsys):
    from rl.games import exact

    hp = PPOHParams(env="tictactoe_selfplay", action_mask=True, hidden_sizes=(16,))
    for step in (10, 20):
        write_artefact(tmp_path / "run", step, hp, seed=step)
    assert exact.main([str(tmp_path / "run")]) == 0
    rows = capsys.readouterr().out.splitlines()[2:]
    assert [r.split()[0].rsplit("-", 1)[1] for r in rows] == ["10", "20"]
    assert exact.main([str(tmp_path / "run"), "--latest"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as stop:
        exact.main([str(tmp_path / "empty")])
    assert stop.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1
