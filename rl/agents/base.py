"""An agent = Model + Algo: a learner and the actors that feed it.

The registered agent names (``ppo``, ``dqn``) map to learner classes; an
``Agent`` builds that learner, the training actor (with the training
act_select and its own random stream) and, on request, more actors
(evaluation, ``compute_action``, later remote workers), each loading the
learner's published weights. The plain-Python loop around them lives in
``rl/experiment.py``:

    actions, extras = actor.act(obs, step)       # NumPy on the host
    env.step(actor.to_env(actions))
    learner.observe(obs=..., actions=..., ..., **extras)
    if learner.update() is not None:              # one compiled call
        actor.load(learner.publish())
"""

import json
from typing import Dict, Optional

import gymnasium as gym
import numpy as np

from rl import registry, seeding
from rl._tf import tf
from rl.agents.actor import (  # noqa: F401  (act_and_observe re-exported)
    Actor,
    PolicySnapshot,
    RandomStream,
    act_and_observe,
    build_actor,
)
from rl.agents.learner import Learner, NonFiniteError  # noqa: F401  (re-exported)
from rl.hparams.base import HParams
from rl.models.settings import ModelSettings


class Agent:
    """A learner of the registered kind plus its training actor."""

    def __init__(self, hp: HParams, observation_space: gym.Space, action_space: gym.Space):
        """Builds the learner and the training actor.

        Args:
            hp: the agent's hparams (``hp.agent`` names the learner).
            observation_space: the env's observation space (rl.envs wrappers applied).
            action_space: the env's action space.
        """
        if hp.host_acting and isinstance(hp, ModelSettings) and hp.torso != "mlp":
            raise ValueError(
                f"host_acting=true acts in NumPy, which runs MLP torsos only; with "
                f"torso={hp.torso} set host_acting=false"
            )
        self.hp = hp
        self.learner_class = registry.agents.get(hp.agent)
        self.learner: Learner = self.learner_class(hp, observation_space, action_space)
        self.model = self.learner.model
        self.obs_shape = tuple(observation_space.shape)
        self.obs_dtype = np.dtype(observation_space.dtype)
        self.actor = self.make_actor(seeding.stream(hp.seed, seeding.ACT), explore=True)
        self._api_actors: Dict[bool, Actor] = {}
        self._api_rng = seeding.stream(hp.seed, seeding.API)
        self._policy_module: Optional["EvalPolicy"] = None

    def make_actor(self, rng: np.random.Generator, explore: bool) -> Actor:
        """A new actor with the learner's current weights.

        Args:
            rng: its random stream.
            explore: True: the training act_select, recording the learner's
                extras, with its exploration schedule; False: the evaluation one.
        """
        learner = self.learner
        return build_actor(
            self.hp,
            (learner.observation_space, learner.action_space),
            learner.publish(),
            rng,
            explore,
            # On the host an actor reads only the network's structure; in TF it
            # needs variables of its own to load snapshots into (a fresh model).
            host_network=self.model.host_network() if self.hp.host_acting else None,
            extras=learner.actor_extras if explore else (),
        )

    # --- the learner's state, for the loop and checkpoints -------------------------
    @property
    def env_steps(self) -> int:
        """Environment steps observed so far, all copies together."""
        return self.learner.env_steps

    def publish(self) -> PolicySnapshot:
        return self.learner.publish()

    def refresh_after_restore(self) -> None:
        """Re-reads the acting weights after a checkpoint restore and gives them to the actor."""
        self.learner.refresh_snapshot()
        self.actor.load(self.learner.publish())

    def checkpoint_items(self) -> Dict[str, tf.Module]:
        """Everything a resumed run needs, by checkpoint key."""
        return {**self.learner.checkpoint_items(), "act_stream": SavedStream(self.actor.stream)}

    def separate_state(self) -> Dict[str, object]:
        """State saved beside each checkpoint in files of its own (the learner's replay)."""
        return self.learner.separate_state()

    # --- for notebooks and serving ---------------------------------------------------
    def compute_action(self, obs, explore: bool = False):
        """Actions for one observation or a batch, as the env takes them.

        Sampling (``explore=True``) draws from a stream of its own, so calls
        made while training never change the run.

        Args:
            obs: one observation shaped like the env's, or a batch [N, ...].
            explore: act with the training act_select instead of the evaluation one
                (``eval_act_select`` at ``eval_epsilon``, as evaluation acts; an exported
                SavedModel acts at epsilon 0).

        Returns:
            One action for a single observation, else a batch of them.
        """
        obs = np.asarray(obs, self.obs_dtype)
        single = obs.shape == self.obs_shape
        if not single and obs.shape[1:] != self.obs_shape:
            raise ValueError(
                f"observation shape {obs.shape} is neither "
                f"{self.obs_shape} nor [N, *{self.obs_shape}]"
            )
        actor = self._api_actors.get(explore)
        if actor is None:
            actor = self._api_actors[explore] = self.make_actor(self._api_rng, explore)
        actor.load(self.learner.publish())
        actions, _ = actor.act(obs[None] if single else obs, self.env_steps)
        actions = actor.to_env(actions)
        if single:
            return actions[0].item() if actions[0].ndim == 0 else actions[0]
        return actions

    def policy_module(self) -> "EvalPolicy":
        """The evaluation policy as a tf.Module, ready for ``tf.saved_model.save``.

        One module per agent, traced once: it reads the model's variables, so each save
        exports the weights of that moment (a new module would cost a trace per checkpoint).
        """
        if self._policy_module is None:
            select = registry.act_select.get(self.hp.eval_act_select)
            self._policy_module = EvalPolicy(
                self.model, select.graph, self.obs_shape, self.obs_dtype
            )
        return self._policy_module


class SavedStream(tf.train.experimental.PythonState):
    """Saves an actor's RandomStream inside tf.train checkpoints (its generator's state)."""

    def __init__(self, stream: RandomStream):
        self.stream = stream

    def serialize(self) -> bytes:
        return json.dumps(self.stream.generator.bit_generator.state).encode()

    def deserialize(self, data: bytes) -> None:
        self.stream.generator.bit_generator.state = json.loads(data)


class EvalPolicy(tf.Module):
    """obs [B, *obs_shape] -> actions [B, ...] with the evaluation act_select.

    Saved as a SavedModel, plain TensorFlow loads it and calls
    ``loaded(obs)`` or ``loaded.signatures["serving_default"](observations=obs)``.
    Random rules draw with a fixed seed and epsilon 0 (``eval_epsilon`` is not applied),
    so the export is deterministic.
    """

    def __init__(self, model: tf.Module, select, obs_shape, obs_dtype):
        super().__init__(name="eval_policy")
        self.model = model
        self._select = select
        self.obs_spec = tf.TensorSpec(
            [None, *obs_shape], tf.as_dtype(obs_dtype), name="observations"
        )
        self.__call__.get_concrete_function(self.obs_spec)  # trace for export

    @tf.function(autograph=False)
    def __call__(self, observations: tf.Tensor) -> tf.Tensor:
        policy = self.model.policy(observations)
        actions = self._select(policy, self.model.head, tf.zeros([2], tf.int32), 0.0)
        return self.model.head.to_env_graph(actions)

    def save(self, path: str) -> None:
        """Writes a SavedModel with a ``serving_default`` signature."""
        signature = self.__call__.get_concrete_function(self.obs_spec)
        tf.saved_model.save(self, path, signatures={"serving_default": signature})


def build_agent(hp: HParams, observation_space: gym.Space, action_space: gym.Space) -> Agent:
    """The agent ``hp.agent`` names, on these spaces."""
    return Agent(hp, observation_space, action_space)
