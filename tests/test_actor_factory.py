"""rl.agents.actor.build_actor: the one way an Actor is built (agent, actor processes,
policy artefacts)."""

import gymnasium as gym
import numpy as np
import pytest

from rl import registry
from rl.agents.actor import PolicySnapshot, build_actor
from rl.agents.base import Agent

pytestmark = pytest.mark.unit


def agent_for(name):
    hp = registry.hparams.get(name)()
    env = gym.make(hp.env)
    spaces = (env.observation_space, env.action_space)
    env.close()
    return hp, spaces, Agent(hp, *spaces)


def test_an_actor_process_acts_as_the_agents_training_actor_given_its_stream():
    # What a worker is sent (a HostPolicy, the pickled schedule, the extras) builds the
    # actor the agent builds for itself: same draws, same epsilon, same extras.
    hp, spaces, agent = agent_for("dqn_tiny")
    obs = np.random.default_rng(0).normal(size=(16, *spaces[0].shape)).astype(np.float32)
    ours = agent.make_actor(np.random.default_rng(5), explore=True)
    theirs = build_actor(
        hp,
        spaces,
        agent.publish(),
        np.random.default_rng(5),
        explore=True,
        host_network=agent.model.host_network(),
        extras=agent.learner.actor_extras,
        exploration=agent.learner.exploration_schedule(hp),
    )
    assert agent.learner.exploration_schedule(hp)(0) > 0  # the draws matter
    for step in (0, 100):
        (a, extras_a), (b, extras_b) = ours.act(obs, step), theirs.act(obs, step)
        np.testing.assert_array_equal(a, b)
        assert extras_a.keys() == extras_b.keys()


def test_weights_that_do_not_fit_the_model_are_refused_naming_both_shapes():
    hp, spaces, _ = agent_for("ppo_tiny")
    wrong = PolicySnapshot(0, (np.zeros((3, 5), np.float32),))
    with pytest.raises(ValueError, match=r"weights of shapes \[\(3, 5\)\] do not fit the model"):
        build_actor(hp, spaces, wrong, np.random.default_rng(0), explore=False)
