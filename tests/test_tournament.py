"""Tournaments (rl/tournament) and scripted players (rl/games/players.py).

Pure functions on hand-computed tables first, then ``python -m rl.tournament`` as
a subprocess: exact payoffs, ratings and Nash of rock-paper-scissors, a dominating
player, bad input, resume after kill -9, and results that do not depend on
--num_workers.
"""

import csv
import json
import math
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from polling import wait_for

from rl import registry
from rl.games.players import (
    GRIDS,
    OneStepLookahead,
    board_from_features,
    landing_cell,
    winning_moves,
)
from rl.games.spec import GAMES, make_game
from rl.tournament import ratings, records, schedule
from rl.tournament.play import game_record, play_game
from rl.tournament.schedule import GameKey

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ELO = 400.0 / math.log(10.0)
RPS = ["always_paper", "always_rock", "always_scissors"]


def tournament(*args, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "rl.tournament", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def read_payoff(folder):
    with open(os.path.join(folder, "payoff.csv"), encoding="utf-8") as f:
        return {(r["player"], r["opponent"]): r for r in csv.DictReader(f)}


def read_ratings(folder):
    with open(os.path.join(folder, "ratings.json"), encoding="utf-8") as f:
        record = json.load(f)
    return record, {p["name"]: p for p in record["players"]}


def game_lines(folder):
    with open(os.path.join(folder, "games.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


# --- ratings ---------------------------------------------------------------------------


@pytest.mark.unit
def test_bradley_terry_two_players_three_wins_to_one():
    # MLE: sigmoid(d) = 3/4, so d = ln 3 and the Elo gap is 400 log10(3) = 190.85.
    points = np.array([[0.0, 3.0], [1.0, 0.0]])
    strengths = ratings.bradley_terry(points, prior=0.0)
    assert strengths[0] - strengths[1] == pytest.approx(math.log(3.0), abs=1e-9)
    assert strengths.sum() == pytest.approx(0.0, abs=1e-12)
    elo = ratings.elo(strengths)
    assert elo == pytest.approx([1000 + 190.848 / 2, 1000 - 190.848 / 2], abs=1e-3)
    # The default prior pulls the gap in only a little on four games.
    assert ratings.bradley_terry(points)[0] - ratings.bradley_terry(points)[1] == pytest.approx(
        math.log(3.0), abs=0.01
    )


@pytest.mark.unit
def test_bradley_terry_recovers_strengths_that_fit_a_table_exactly():
    # Strengths 0, ln 2, ln 4: P(B > A) = 2/3, P(C > B) = 2/3, P(C > A) = 4/5; a table
    # with exactly those frequencies is fitted by exactly those strengths.
    points = np.array(
        [
            [0.0, 1.0, 1.0],  # A: 1 of 3 against B, 1 of 5 against C
            [2.0, 0.0, 1.0],  # B: 2 of 3 against A, 1 of 3 against C
            [4.0, 2.0, 0.0],  # C: 4 of 5 against A, 2 of 3 against B
        ]
    )
    strengths = ratings.bradley_terry(points, prior=0.0)
    expected = np.log([1.0, 2.0, 4.0])
    assert strengths == pytest.approx(expected - expected.mean(), abs=1e-9)


@pytest.mark.unit
def test_draws_count_half_a_win_each_way():
    wins = np.array([[0, 2], [0, 0]])
    draws = np.array([[0, 2], [2, 0]])  # 2 wins + 2 draws: 3 points of 4, as 3-1
    assert ratings.elo_ratings(wins, draws, prior=0.0) == pytest.approx(
        ratings.elo(ratings.bradley_terry(np.array([[0.0, 3.0], [1.0, 0.0]]), prior=0.0))
    )


@pytest.mark.unit
def test_a_player_who_wins_every_game_gets_a_finite_higher_rating():
    wins = np.array([[0, 10, 10], [0, 0, 5], [0, 5, 0]])
    elo = ratings.elo_ratings(wins, np.zeros((3, 3), int))
    assert np.all(np.isfinite(elo))
    assert elo[0] > elo[1] + 400 and elo[1] == pytest.approx(elo[2], abs=1e-6)
    assert elo.mean() == pytest.approx(1000.0, abs=1e-6)


@pytest.mark.unit
def test_bootstrap_is_seeded_and_brackets_the_estimate():
    wins = np.array([[0, 14], [6, 0]])
    draws = np.zeros((2, 2), int)
    first = ratings.bootstrap_elo(wins, draws, 200, seed=3)
    assert first.shape == (200, 2)
    assert np.array_equal(first, ratings.bootstrap_elo(wins, draws, 200, seed=3))
    low, high = ratings.percentile_interval(first)
    estimate = ratings.elo_ratings(wins, draws)
    assert np.all(low < estimate) and np.all(estimate < high)


@pytest.mark.unit
def test_nash_of_rock_paper_scissors_is_uniform():
    rps = np.array([[0.0, -1.0, 1.0], [1.0, 0.0, -1.0], [-1.0, 1.0, 0.0]])
    row, column, value = ratings.zero_sum_nash(rps)
    assert row == pytest.approx([1 / 3] * 3, abs=1e-9)
    assert column == pytest.approx([1 / 3] * 3, abs=1e-9)
    assert value == pytest.approx(0.0, abs=1e-9)


@pytest.mark.unit
def test_nash_with_a_dominant_strategy_is_pure():
    # Player 1 beats both others; 0 and 2 cycle with nobody else.
    scores = np.array([[np.nan, 0.2, 0.7], [0.8, np.nan, 0.9], [0.3, 0.1, np.nan]])
    assert ratings.meta_game_nash(scores) == pytest.approx([0.0, 1.0, 0.0], abs=1e-9)


@pytest.mark.unit
def test_nash_of_a_two_by_two_game_computed_by_hand():
    # Row mixes p: 3p - 2(1 - p) = -p + (1 - p)  =>  p = 3/7, value 1/7.
    # Column mixes q: 3q - (1 - q) = -2q + (1 - q)  =>  q = 2/7.
    row, column, value = ratings.zero_sum_nash(np.array([[3.0, -1.0], [-2.0, 1.0]]))
    assert row == pytest.approx([3 / 7, 4 / 7], abs=1e-9)
    assert column == pytest.approx([2 / 7, 5 / 7], abs=1e-9)
    assert value == pytest.approx(1 / 7, abs=1e-9)


# --- records and schedule --------------------------------------------------------------


def record(a, b, index, winner):
    return {"pair": [a, b], "index": index, "winner": winner}


@pytest.mark.unit
def test_score_tables_and_mean_scores_from_game_records():
    games = [
        record("a", "b", 0, "a"),
        record("a", "b", 1, "a"),
        record("a", "b", 2, None),
        record("a", "b", 3, "b"),
        record("b", "c", 0, "c"),
        record("a", "x", 0, "x"),  # x is not in this tournament: left out
    ]
    wins, draws = records.score_tables(games, ["a", "b", "c"])
    assert wins.tolist() == [[0, 2, 0], [1, 0, 0], [0, 1, 0]]
    assert draws.tolist() == [[0, 1, 0], [1, 0, 0], [0, 0, 0]]
    scores = ratings.mean_scores(wins, draws)
    assert scores[0, 1] == pytest.approx(2.5 / 4) and scores[1, 0] == pytest.approx(1.5 / 4)
    assert scores[2, 1] == 1.0 and scores[1, 2] == 0.0
    assert np.isnan(scores[0, 2]) and np.isnan(scores[1, 1])


@pytest.mark.unit
def test_seats_alternate_and_an_odd_count_gives_one_player_one_more_first_move():
    for count in (4, 5):
        firsts = [schedule.first_mover(7, GameKey("a", "b", k)) for k in range(count)]
        assert sorted([firsts.count("a"), firsts.count("b")]) == [count // 2, count - count // 2]
        assert all(x != y for x, y in zip(firsts, firsts[1:]))


@pytest.mark.unit
def test_a_game_seed_depends_on_its_identity_only():
    key = GameKey("a", "b", 3)
    assert schedule.game_seed(0, key) == schedule.game_seed(0, GameKey("a", "b", 3))
    others = {GameKey("a", "b", 2), GameKey("a", "c", 3), GameKey("b", "c", 3)}
    assert schedule.game_seed(0, key) not in {schedule.game_seed(0, k) for k in others}
    assert schedule.game_seed(0, key) != schedule.game_seed(1, key)


@pytest.mark.unit
def test_artefact_selection_every_kth_from_the_oldest_or_the_latest():
    steps = [100, 200, 300, 400, 500]
    assert schedule.select_steps(steps, None, False) == steps
    assert schedule.select_steps(steps, 2, False) == [100, 300, 500]
    assert schedule.select_steps(steps, 3, False) == [100, 400]
    assert schedule.select_steps(steps, None, True) == [500]


@pytest.mark.unit
def test_a_tournament_folder_may_only_grow():
    old = {"game": "rps", "seed": 0, "games_per_pair": 4, "players": {"a": {}, "b": {}}}
    grown = {"game": "rps", "seed": 0, "games_per_pair": 6, "players": {"a": {}, "b": {}, "c": {}}}
    assert schedule.config_conflict(old, old) is None
    assert schedule.config_conflict(old, grown) is None
    assert "c are not in this tournament" in schedule.config_conflict(
        grown, {**grown, "players": old["players"]}
    )
    assert "game 'rps'" in schedule.config_conflict(old, {**old, "game": "tictactoe"})
    assert "seed 0" in schedule.config_conflict(old, {**old, "seed": 1})
    assert "shrink to 2" in schedule.config_conflict(old, {**old, "games_per_pair": 2})


@pytest.mark.unit
def test_games_file_drops_a_cut_line_and_refuses_a_damaged_one(tmp_path, capsys):
    path = str(tmp_path / "games.jsonl")
    with open(path, "w") as f:
        f.write(json.dumps(record("a", "b", 0, "a")) + "\n")
        f.write(json.dumps(record("a", "b", 0, "b")) + "\n")  # a duplicate: the first counts
        f.write('{"pair": ["a", "b"], "ind')  # a kill cut this line
    assert records.read_games(path) == [record("a", "b", 0, "a")]
    records.GamesFile(path).append([record("a", "b", 1, None)])
    assert capsys.readouterr().err == (
        f"rl: dropped the last line of {path}, cut short (25 bytes without a newline): "
        "its game is played again\n"
    )
    assert [r["index"] for r in records.read_games(path)] == [0, 1]
    with open(path, "a") as f:
        f.write('{"pair": ["a", "b"], "index": 2, "winner": "z"}\n')
    with pytest.raises(schedule.TournamentError, match="line 4 names winner 'z'"):
        records.read_games(path)


@pytest.mark.unit
@pytest.mark.parametrize(
    "text, said",
    [
        ("[]", "holds an array; it must hold a JSON object; use another --output_dir"),
        ('{"players": ', "is not JSON (Expecting value"),
        ('{"game": "rps"}', "is not a tournament's set-up; use another --output_dir"),
    ],
)
def test_a_damaged_tournament_config_is_named_with_what_to_do(tmp_path, text, said):
    assert records.read_config(str(tmp_path)) is None
    (tmp_path / records.CONFIG_FILE).write_text(text)
    with pytest.raises(schedule.TournamentError) as raised:
        records.read_config(str(tmp_path))
    assert str(raised.value).startswith(str(tmp_path / records.CONFIG_FILE))
    assert said in str(raised.value)


# --- players and games -----------------------------------------------------------------


def tictactoe_features(own, opponent):
    planes = np.zeros((3, 3, 2), np.float32)
    for move in own:
        planes[move // 3, move % 3, 0] = 1
    for move in opponent:
        planes[move // 3, move % 3, 1] = 1
    return planes.reshape(-1)


@pytest.mark.unit
def test_lookahead_wins_at_once_else_blocks_else_plays_legally():
    player = registry.players.get("one_step_lookahead")(GAMES["tictactoe"])
    rng = np.random.default_rng(0)

    def act(own, opponent):
        mask = np.ones(9, bool)
        mask[list(own) + list(opponent)] = False
        return player.act(tictactoe_features(own, opponent), mask, rng)

    assert act(own=[0, 4], opponent=[1, 2]) == 8  # the diagonal 0-4-8 wins
    assert act(own=[0, 1], opponent=[3, 4]) == 2  # winning (0-1-2) beats blocking (3-4-5)
    assert act(own=[0, 7], opponent=[3, 4]) == 5  # block the row 3-4-5
    assert act(own=[0, 1], opponent=[2, 4]) == 6  # 0-1-2 is blocked; block the diagonal 2-4-6
    for _ in range(20):
        assert act(own=[4], opponent=[0]) not in (0, 4)


@pytest.mark.unit
def test_connect_four_lookahead_reads_where_a_stone_lands():
    grid = GRIDS["connect_four"]
    planes = np.zeros((6, 7, 2), np.float32)
    for row, col in ((5, 0), (4, 1), (3, 2)):  # own diagonal, rising to the right
        planes[row, col, 0] = 1
    for row, col in ((5, 1), (5, 2), (4, 2), (5, 3), (4, 3)):  # supports, the opponent's
        planes[row, col, 1] = 1
    own, opponent = board_from_features(grid, planes.reshape(-1))
    occupied = own | opponent
    # Column 3 is filled to row 4: a stone lands on (3, 3), one below the winning (2, 3).
    assert landing_cell(grid, occupied, 3) == (3, 3)
    assert winning_moves(grid, own, occupied, np.arange(7)).tolist() == []
    planes[3, 3, 1] = 1  # now column 3 is filled to row 3: a stone lands on (2, 3) and wins
    own, opponent = board_from_features(grid, planes.reshape(-1))
    assert winning_moves(grid, own, own | opponent, np.arange(7)).tolist() == [3]
    player = OneStepLookahead(grid)
    assert player.act(planes.reshape(-1), np.ones(7, bool), np.random.default_rng(0)) == 3


@pytest.mark.unit
def test_the_catalog_lists_the_scripted_players():
    from rl import catalog

    listing = catalog.list_all()
    assert "players:" in listing
    for name in ("random", "first_legal", "one_step_lookahead", *RPS):
        assert f"  {name}\n" in listing + "\n"


@pytest.mark.unit
def test_scripted_players_refuse_games_they_cannot_play():
    with pytest.raises(ValueError, match="plays rps, not 'tictactoe'"):
        registry.players.get("always_rock")(GAMES["tictactoe"])
    with pytest.raises(ValueError, match="not 'rps'"):
        registry.players.get("one_step_lookahead")(GAMES["rps"])


@pytest.mark.unit
def test_rps_moves_are_rock_paper_scissors_in_that_order():
    # Paper covers rock, rock blunts scissors: 15 throws of each, every one won.
    env, spec = make_game("rps"), GAMES["rps"]
    throws = {n: registry.players.get(n)(spec) for n in RPS}
    assert play_game(env, spec, (throws["always_paper"], throws["always_rock"]), 0).returns == (
        15.0,
        -15.0,
    )
    assert play_game(env, spec, (throws["always_scissors"], throws["always_rock"]), 0).returns == (
        -15.0,
        15.0,
    )


@pytest.mark.unit
def test_an_illegal_move_forfeits_the_game():
    class Stubborn:
        name = "stubborn"

        def act(self, features, mask, rng):
            return 0  # legal once, then taken

    spec = GAMES["tictactoe"]
    first_legal = registry.players.get("first_legal")(spec)
    result = play_game(make_game("tictactoe"), spec, (Stubborn(), first_legal), seed=0)
    assert result.illegal == 0 and result.returns == (-1.0, 1.0) and result.moves == 2
    line = game_record(GameKey("a", "stubborn", 0), 5, "stubborn", result)
    assert line["winner"] == "a" and line["illegal"] == "stubborn" and line["first"] == "stubborn"


# --- python -m rl.tournament -----------------------------------------------------------


@pytest.mark.process
def test_rock_paper_scissors_gives_the_cycle_equal_ratings_and_the_uniform_nash(tmp_path):
    out = tmp_path / "t"
    proc = tournament("--game", "rps", "--players", *RPS, "--games", 6, "--output_dir", out)
    assert proc.returncode == 0, proc.stderr
    payoff = read_payoff(out)
    beats = {"always_paper": "always_rock", "always_rock": "always_scissors",
             "always_scissors": "always_paper"}  # fmt: skip
    assert len(payoff) == 6
    for (player, opponent), row in payoff.items():
        won = beats[player] == opponent
        assert float(row["score"]) == (1.0 if won else 0.0)
        assert (int(row["wins"]), int(row["draws"]), int(row["losses"])) == (
            (6, 0, 0) if won else (0, 0, 6)
        )
    record, players = read_ratings(out)
    for name in RPS:
        assert players[name]["elo"] == pytest.approx(1000.0, abs=0.01)
        assert players[name]["nash"] == pytest.approx(1 / 3, abs=1e-6)
        assert players[name]["score_vs_nash"] == pytest.approx(0.5, abs=1e-6)
    assert len(game_lines(out)) == 3 * 6
    with open(out / "payoff.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    # TensorBoard gets the heatmap as an image summary, filed under the games played.
    from tensorboard.backend.event_processing import event_file_loader

    (events,) = os.listdir(out / "tb")
    values = [
        (event.step, value.tag, value.metadata.plugin_data.plugin_name)
        for event in event_file_loader.EventFileLoader(str(out / "tb" / events)).Load()
        for value in event.summary.value
    ]
    assert values == [(18, "tournament/payoff", "images")]


@pytest.mark.process
def test_the_one_step_lookahead_is_rated_above_random_beyond_the_bootstrap(tmp_path):
    out = tmp_path / "t"
    proc = tournament(
        "--game", "tictactoe", "--players", "random", "one_step_lookahead",
        "--games", 60, "--output_dir", out,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    record, players = read_ratings(out)
    assert [p["name"] for p in record["players"]] == ["one_step_lookahead", "random"]
    (difference,) = record["differences"]
    # The bootstrap interval of the difference (not of each rating) excludes zero.
    assert difference["better"] == "one_step_lookahead" and difference["low"] > 0
    assert players["one_step_lookahead"]["nash"] == 1.0
    assert "one_step_lookahead" in proc.stdout.splitlines()[1]


@pytest.mark.process
@pytest.mark.parametrize(
    "args, message",
    [
        (["--players", "random", "always_rok"], "unknown player 'always_rok': did you mean"),
        (["--players", "random", "always_rock", "--num_worker", "2"], "did you mean '--num_work"),
        (["--players", "random"], "needs at least 2 players, got 1"),
        (["--players", "random", "always_rock", "--games", "0"], "must be at least 1, got 0"),
        # Every game failed on it (exit 1), after tournament.json was written.
        (["--players", "random", "always_rock", "--seed", "-1"], "must be at least 0, got -1"),
        (["--players", "random", "random"], "two players are named 'random'"),
        (
            ["--players", "random", "always_rock", "--num_workes", "2"],
            "unrecognized arguments: --num_workes; did you mean '--num_workers'?",
        ),
        (["--players", "random", "one_step_lookahead"], "plays connect_four, tictactoe, not"),
        (["{empty}", "--players", "random", "always_rock"], "holds no policy artefacts"),
        # A run folder after --players was "unknown player '.../empty_run'".
        (["--players", "random", "always_rock", "{empty}"], "that is a folder, not a scripted"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, args, message):
    empty = tmp_path / "empty_run"
    empty.mkdir()
    args = [str(empty) if a == "{empty}" else a for a in args]
    games = [] if "--games" in args else ["--games", "2"]
    proc = tournament("--game", "rps", *args, *games, "--output_dir", tmp_path / "t")
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "t").exists()


@pytest.mark.process
def test_an_output_folder_that_is_a_file_or_holds_a_folder_for_games_is_one_line(tmp_path):
    (tmp_path / "a_file").write_text("mine\n")
    args = ["--game", "rps", "--players", *RPS, "--games", 2, "--output_dir"]
    for output_dir, said in [
        ("a_file/t", "a_file is a file, not a folder"),  # was a NotADirectoryError traceback
        ("a_file", "a_file is a file, not a folder"),
        ("t", "games.jsonl cannot be read (Is a directory)"),
    ]:
        if output_dir == "t":
            assert tournament(*args, tmp_path / "t").returncode == 0
            (tmp_path / "t" / "games.jsonl").unlink()
            (tmp_path / "t" / "games.jsonl").mkdir()
        proc = tournament(*args, tmp_path / output_dir)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert said in proc.stderr
    assert (tmp_path / "a_file").read_text() == "mine\n"


@pytest.mark.process
def test_a_killed_tournament_resumes_with_every_game_once_and_grows_only(tmp_path):
    out = tmp_path / "t"
    args = ["--game", "rps", "--players", *RPS, "--games", 1000, "--output_dir", out]
    expected = 3 * 1000
    proc = subprocess.Popen(
        [sys.executable, "-m", "rl.tournament", *map(str, args)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    games = out / "games.jsonl"
    wait_for(lambda: games.exists() and games.stat().st_size > 0, "a game record", process=proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with open(games, "a") as f:
        f.write('{"pair": ["always_paper", "always_rock"], "ind')  # a line cut by the kill
    before = len(records.read_games(str(games)))
    assert 0 < before < expected
    rerun = tournament(*args)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{expected} games, {before} already played" in rerun.stderr
    assert f"rl: dropped the last line of {games}, cut short (46 bytes" in rerun.stderr
    lines = game_lines(out)
    keys = {(tuple(r["pair"]), r["index"]) for r in lines}
    assert len(lines) == len(keys) == expected
    assert all(int(r["games"]) == 1000 for r in read_payoff(out).values())
    # Another set of players into the same folder is refused unless it only adds players.
    shrunk = tournament(
        "--game", "rps", "--players", *RPS[:2], "--games", 1000, "--output_dir", out
    )
    assert shrunk.returncode == 2 and "always_scissors are not in this tournament" in shrunk.stderr
    grown = tournament(
        "--game", "rps", "--players", *RPS, "random", "--games", 1000, "--output_dir", out
    )  # fmt: skip
    assert grown.returncode == 0, grown.stderr
    assert f"{6 * 1000} games ({3 * 1000} played now)" in grown.stderr


def children(pid):
    """The pids of a process's children (Linux's /proc)."""
    with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as f:
        return [int(p) for p in f.read().split()]


def alive(pid):
    """Whether a process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def start_tournament(args, sigint_ignored=False):
    command = [sys.executable, "-m", "rl.tournament", *map(str, args)]
    if sigint_ignored:  # as a script's background job starts: the ignore survives exec
        command = ["sh", "-c", 'trap "" INT; exec "$@"', "sh", *command]
    return subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def first_game_and_workers(proc, folder):
    """The worker processes, once a first game is recorded (not multiprocessing's
    resource tracker, which the tournament's end stops)."""
    games = folder / "games.jsonl"
    wait_for(lambda: games.exists() and games.stat().st_size > 0, "a game record", process=proc)

    def is_worker(pid):
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"spawn_main" in f.read()

    return [pid for pid in children(proc.pid) if is_worker(pid)]


# Games slow enough (one-step lookahead at connect four: chunks of 25 games take about a
# second) that a tournament of 300 games a pair is far from its end at its first record.
SLOW = ["--game", "connect_four", "--players", "random", "first_legal", "one_step_lookahead",
        "--num_workers", 2]  # fmt: skip


def assert_a_rerun_plays_every_game_once(args, out):
    """The same command, rerun, finishes the stopped SLOW tournament of 300 games a pair."""
    rerun = tournament(*args)
    assert rerun.returncode == 0, rerun.stderr
    lines = game_lines(out)
    assert len(lines) == len({(tuple(r["pair"]), r["index"]) for r in lines}) == 3 * 300


@pytest.mark.process
def test_a_killed_worker_process_stops_the_tournament_and_a_rerun_finishes_it(tmp_path):
    out = tmp_path / "t"
    args = [*SLOW, "--games", 300, "--output_dir", out]
    proc = start_tournament(args)
    try:
        workers = first_game_and_workers(proc, out)
        assert len(workers) == 2
        os.kill(workers[0], signal.SIGKILL)
        _, stderr = proc.communicate(timeout=120)  # multiprocessing.Pool waited for ever
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 1, stderr
    assert "WorkerDied: worker process" in stderr.splitlines()[-1], stderr
    assert "rerun the same command to resume" in stderr.splitlines()[-1]
    assert_a_rerun_plays_every_game_once(args, out)


@pytest.mark.process
def test_the_worker_processes_of_a_killed_tournament_end_with_it(tmp_path):
    proc = start_tournament([*SLOW, "--games", 2000, "--output_dir", tmp_path / "t"])
    workers = first_game_and_workers(proc, tmp_path / "t")
    proc.kill()
    proc.wait()
    try:  # each ends after its chunk (25 games at most), when it cannot send the result
        wait_for(lambda: not any(map(alive, workers)), "end of the worker processes")
    finally:
        for pid in filter(alive, workers):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.process
def test_ctrl_c_stops_the_worker_processes_and_a_rerun_finishes(tmp_path):
    out = tmp_path / "t"
    args = [*SLOW, "--games", 300, "--output_dir", out]
    proc = start_tournament(args, sigint_ignored=True)
    workers = first_game_and_workers(proc, out)
    os.killpg(proc.pid, signal.SIGINT)  # as Ctrl-C (or kill -INT) sends it
    try:
        _, stderr = proc.communicate(timeout=120)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130 and "rerun the same command to resume" in stderr, stderr
    assert not any(map(alive, workers))  # killed and reaped before the parent returned
    assert_a_rerun_plays_every_game_once(args, out)


@pytest.mark.process
def test_a_stopped_worker_process_is_killed_at_the_worker_timeout_and_a_rerun_finishes(tmp_path):
    out = tmp_path / "t"
    args = [*SLOW, "--games", 300, "--output_dir", out, "--worker_timeout", 10]
    proc = start_tournament(args)
    try:
        workers = first_game_and_workers(proc, out)
        os.kill(workers[0], signal.SIGSTOP)  # hung: alive, its pipe open, silent
        _, stderr = proc.communicate(timeout=120)  # it waited for ever
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 1, stderr
    last = stderr.splitlines()[-1]
    assert f"WorkerHung: worker process {workers[0]} returned no games for 10 s" in last, stderr
    assert "rerun the same command to resume" in last
    assert not any(map(alive, workers))  # the stopped one killed and reaped too
    assert_a_rerun_plays_every_game_once(args, out)


@pytest.mark.process
def test_sigterm_stops_a_tournament_with_a_stopped_worker_at_once_with_143(tmp_path):
    out = tmp_path / "t"
    proc = start_tournament([*SLOW, "--games", 300, "--output_dir", out])  # timeout 300 s
    workers = first_game_and_workers(proc, out)
    os.kill(workers[0], signal.SIGSTOP)
    proc.send_signal(signal.SIGTERM)  # to the tournament alone, as `kill PID` sends it
    try:
        _, stderr = proc.communicate(timeout=30)  # it died at once, leaving the stopped one
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 143, stderr
    assert stderr.splitlines()[-1].endswith("stopped; rerun the same command to resume")
    assert not any(map(alive, workers))


@pytest.mark.process
def test_two_worker_processes_give_the_same_games_as_one(tmp_path):
    args = ["--game", "connect_four", "--players", "random", "first_legal", "one_step_lookahead",
            "--games", 10]  # fmt: skip
    one = tournament(*args, "--output_dir", tmp_path / "one")
    two = tournament(*args, "--output_dir", tmp_path / "two", "--num_workers", 2)
    assert one.returncode == 0 and two.returncode == 0, one.stderr + two.stderr
    assert read_payoff(tmp_path / "one") == read_payoff(tmp_path / "two")

    def by_key(folder):
        return sorted(game_lines(folder), key=lambda r: (r["pair"], r["index"]))

    assert by_key(tmp_path / "one") == by_key(tmp_path / "two")


@pytest.mark.process
def test_policy_artefacts_of_a_run_enter_by_step(tmp_path):
    run = tmp_path / "ttt"
    train = subprocess.run(
        [sys.executable, "train.py", "--hparams", "ppo_tictactoe_selfplay", "--hparam_override",
         "train_steps=1024,checkpoint_interval=512,eval_interval=100000,num_envs=4",
         "--output_dir", str(run)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert train.returncode == 0, train.stderr
    out = tmp_path / "t"
    proc = tournament(run, "--latest", "--players", "random", "--game", "tictactoe",
                      "--games", 4, "--output_dir", out)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert set(read_ratings(out)[1]) == {"ttt@1024", "random"}
    grown = tournament(run, "--players", "random", "--game", "tictactoe", "--games", 4,
                       "--output_dir", out)  # fmt: skip
    assert grown.returncode == 0, grown.stderr
    assert set(read_ratings(out)[1]) == {"ttt@512", "ttt@1024", "random"}
    wrong = tournament(run, "--players", "random", "--game", "connect_four", "--games", 4,
                       "--output_dir", tmp_path / "c4")  # fmt: skip
    assert wrong.returncode == 2 and "is a run of tictactoe, not connect_four" in wrong.stderr
