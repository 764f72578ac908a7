"""The actor: policy weights + an act_select + its own random stream.

An actor turns observations into actions and records what its learner needs
from acting time (the behaviour log-prob for PPO): an on-policy learner never
recomputes it with newer weights. It reads weights only from a
``PolicySnapshot`` that its learner published, so it can live in another
process or on another machine; in one process, loading a snapshot is
swapping a reference.

With ``on_host`` (small MLP models, the default) acting is NumPy: no call into
TensorFlow per environment step. Otherwise each vectorised step is one
compiled call on the actor's own copy of the network.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from rl import registry
from rl._tf import tf
from rl.algos.act_select.base import ActSelect
from rl.algos.noise import OrnsteinUhlenbeckNoise
from rl.algos.schedules import constant_schedule
from rl.envs import true_next_obs
from rl.envs.atari import LIFE_LOST
from rl.hparams.base import HParams
from rl.hparams.continuous import TD3HParams

# What an actor can record beside each action, for its learner.
ACTOR_EXTRAS = ("log_prob",)


def evaluation_rule(hp) -> Tuple[ActSelect, Callable[[int], float]]:
    """How evaluation and test episodes act: ``hp.eval_act_select`` at epsilon ``hp.eval_epsilon``.

    Args:
        hp: resolved hparams (rl/hparams).

    Returns:
        (the act_select, epsilon as a picklable function of the env step).
    """
    return registry.act_select.get(hp.eval_act_select), functools.partial(
        constant_schedule, hp.eval_epsilon
    )


@dataclasses.dataclass(frozen=True)
class PolicySnapshot:
    """Versioned copies of the weights acting reads.

    Attributes:
        version: the learner's update count when published (0: initial weights).
        arrays: values of the model's ``acting_variables()``, in that order.
    """

    version: int
    arrays: Tuple[np.ndarray, ...]


class RandomStream:
    """A NumPy generator behind one reference, so the generator can be swapped
    (``Actor.use_stream``) while checkpoints keep pointing at the stream
    (rl/agents/base.py saves its state)."""

    def __init__(self, generator: np.random.Generator):
        self.generator = generator


class Actor:
    """Acts with the policy of the last snapshot it loaded."""

    def __init__(
        self,
        model,
        act_select: ActSelect,
        rng: np.random.Generator,
        extras: Sequence[str] = (),
        exploration: Optional[Callable[[int], float]] = None,
        on_host: bool = True,
        env_ids: Optional[Tuple[int, int]] = None,
        action_noise: Optional[OrnsteinUhlenbeckNoise] = None,
    ):
        """Builds an actor; call ``load`` before ``act``.

        Args:
            model: a network (rl/models); on the host only its structure is
                used, otherwise its acting variables receive the snapshots,
                so give the actor a copy of its own.
            act_select: the rule choosing actions.
            rng: where the act_select's randomness comes from (an actor process's
                is its rows of the run's stream, rl/seeding.py RowDraws).
            extras: what to record per action, from ACTOR_EXTRAS.
            exploration: epsilon as a function of the env step passed to
                ``act`` (a number, or one per env copy of the run); None: 0.
            on_host: act in NumPy (MLP torsos) instead of TensorFlow.
            env_ids: (first, end): the run's env copies this actor acts for, when
                ``exploration`` gives one epsilon per env copy; None: all of them.
            action_noise: a noise process added to Box actions (scaled onto the
                bounds, then clipped to them), restarted by ``episodes_ended``.
        """
        unknown = set(extras) - set(ACTOR_EXTRAS)
        if unknown:
            raise ValueError(f"unknown actor extras {sorted(unknown)}: valid: {ACTOR_EXTRAS}")
        if model.outputs not in act_select.acts_on:
            raise ValueError(
                f"this act_select acts on {' or '.join(sorted(act_select.acts_on))}, "
                f"but the model gives {model.outputs}"
            )
        self.model = model
        self.head = model.head
        # On the host only the network's structure is read (no TensorFlow).
        self.host_policy = model.host_network() if on_host else None
        self.act_select = act_select
        self.stream = RandomStream(rng)
        self.extras = tuple(extras)
        self.exploration = exploration or (lambda step: 0.0)
        self.on_host = on_host
        self.env_ids = env_ids
        self.action_noise = action_noise
        if action_noise is not None:  # the noise's units: half the Box's range, per dimension
            self._noise_scale = self.head.scale_and_shift()[0].reshape(-1)
        self.version = -1
        self._arrays: Tuple[np.ndarray, ...] = ()
        if not on_host:
            self._variables = model.acting_variables()
            self._act_in_graph = tf.function(self._graph_act, autograph=False)

    @property
    def rng(self) -> np.random.Generator:
        return self.stream.generator

    def use_stream(self, rng: np.random.Generator) -> None:
        """Draws from ``rng`` from now on (evaluation: a fresh stream per evaluation)."""
        self.stream.generator = rng

    def load(self, snapshot: PolicySnapshot) -> None:
        """Acts with these weights from now on."""
        if snapshot.version == self.version and snapshot.arrays is self._arrays:
            return
        if not self.on_host:
            for variable, value in zip(self._variables, snapshot.arrays):
                variable.assign(value)
        self._arrays = snapshot.arrays
        self.version = snapshot.version

    def act(self, obs: np.ndarray, step: int = 0) -> Tuple[np.ndarray, Dict[str, np.ndarray]]:
        """Actions for a batch of observations, and the extras recorded with them.

        Args:
            obs: [N, *obs_shape] observations, one per env copy.
            step: env steps so far (exploration schedules read it).

        Returns:
            actions [N, *action_shape] (as the learner stores them; ``to_env``
            gives what the env takes) and {extra name: [N] array}.
        """
        if self.version < 0:
            raise RuntimeError("the actor has no weights yet: load a PolicySnapshot first")
        epsilon = self.exploration(step)
        if np.ndim(epsilon):  # one per env copy of the run (Ape-X): this actor's share
            epsilon = np.asarray(epsilon, np.float32)[slice(*self.env_ids or (None,))]
            if len(epsilon) != len(obs):  # a batch of another size (compute_action)
                epsilon = np.float32(np.mean(epsilon))
        else:
            epsilon = float(epsilon)
        if self.on_host:
            policy = self.host_policy(obs, self._arrays)
            actions = self.act_select.host(policy, self.rng, epsilon)
            extras = {"log_prob": policy.log_prob(actions)} if self.extras else {}
        else:
            # One seed pair drawn per row (a per-row draw, rl/seeding.py RowDraws: each
            # actor process gets its own and all advance the run's stream alike); the
            # first row's seeds the batch.
            seed = self.rng.integers(0, 2**31 - 1, size=(len(obs), 2), dtype=np.int32)[0]
            actions, log_prob = self._act_in_graph(
                tf.constant(obs), tf.constant(seed), tf.constant(epsilon, tf.float32)
            )
            actions = actions.numpy()
            extras = {"log_prob": log_prob.numpy()} if self.extras else {}
        if self.action_noise is not None:
            noisy = actions + self.action_noise(self.rng, actions.shape) * self._noise_scale
            actions = np.clip(noisy, self.head.low, self.head.high).astype(np.float32)
        return actions, extras

    def episodes_ended(self, done: np.ndarray) -> None:
        """Restarts the action noise of the env copies whose episode just ended."""
        if self.action_noise is not None:
            self.action_noise.reset(done)

    def to_env(self, actions: np.ndarray) -> np.ndarray:
        """Actions as the env takes them (a plain Gaussian's samples clipped to the bounds)."""
        return self.head.to_env(actions)

    def _graph_act(self, obs, seed, epsilon):
        policy = self.model.policy(obs)
        actions = self.act_select.graph(policy, self.head, seed, epsilon)
        if "log_prob" in self.extras:
            return actions, self.head.log_prob(policy, actions)
        return actions, tf.zeros([tf.shape(obs)[0]])


def action_noise_for(hp: HParams) -> Optional[OrnsteinUhlenbeckNoise]:
    """The noise process a training actor adds to its actions; None: none beyond the
    act_select's (only TD3 and DDPG hparams name one)."""
    if not isinstance(hp, TD3HParams) or hp.noise_process != "ornstein_uhlenbeck":
        return None
    return OrnsteinUhlenbeckNoise(hp.ou_theta, hp.exploration_noise, hp.ou_dt)


def build_actor(
    hp,
    spaces: Tuple[Any, Any],
    snapshot: PolicySnapshot,
    rng: np.random.Generator,
    explore: bool,
    *,
    host_network=None,
    extras: Sequence[str] = (),
    exploration: Optional[Callable[[int], float]] = None,
    env_ids: Optional[Tuple[int, int]] = None,
) -> Actor:
    """An actor acting with ``snapshot``: the one way the agent, the actor processes and
    the policy artefacts build theirs.

    Args:
        hp: the run's resolved hparams (rl/hparams); ``hp.host_acting`` says where it acts.
        spaces: (observation space, action space) of one env copy.
        snapshot: the weights it acts with until it loads others.
        rng: its random stream (rl/seeding.py names one per purpose).
        explore: True: act as training does (``hp.act_select``, the exploration schedule,
            the action noise); False: as evaluation does (``evaluation_rule``).
        host_network: acting on the host, the network's structure when the caller has it
            (the learner's model's, a HostPolicy sent to an actor process); None: a fresh
            model of ``hp.model`` (which also acts in TensorFlow, with variables of its own).
        extras: what to record with each action for the learner (training actors).
        exploration: epsilon per env step in place of the learner's schedule (exploring
            only): an actor process receives it pickled, since looking it up would import
            the learner and TensorFlow; an artefact holds it at its step.
        env_ids: (first, end): the run's env copies it acts for (actor processes).

    Raises:
        ValueError: the snapshot does not fit the model, or the act_select the model.
    """
    if explore:
        select = registry.act_select.get(hp.act_select)
        if exploration is None:
            exploration = registry.agents.get(hp.agent).exploration_schedule(hp)
        noise = action_noise_for(hp)
    else:
        select, exploration = evaluation_rule(hp)
        noise = None
    network = host_network if hp.host_acting else None
    if network is None:
        network = registry.models.get(hp.model)(hp, *spaces, seed=hp.seed)
        expected = [tuple(v.shape) for v in network.acting_variables()]
        found = [tuple(np.shape(a)) for a in snapshot.arrays]
        if expected != found:
            raise ValueError(f"weights of shapes {found} do not fit the model {expected}")
    actor = Actor(
        network,
        select,
        rng,
        extras=extras,
        exploration=exploration,
        on_host=hp.host_acting,
        env_ids=env_ids,
        action_noise=noise,
    )
    actor.load(snapshot)
    return actor


def act_and_observe(actor: Actor, learner, envs, obs: np.ndarray, step: int):
    """One vectorised env step: the actor acts, the envs step, the learner observes.

    Args:
        actor: acts on ``obs`` (its extras go to the learner with the step).
        learner: records the transitions (``observe(**step)``), with the true final
            observations at episode ends.
        envs: a SAME_STEP-autoreset vector env (rl.envs.make_vec_env).
        obs: [N, ...] current observations.
        step: env steps so far (exploration schedules read it).

    Returns:
        The envs' next observations and the step's info dict.
    """
    actions, extras = actor.act(obs, step)
    next_obs, rewards, terminated, truncated, info = envs.step(actor.to_env(actions))
    actor.episodes_ended(terminated | truncated)
    step = dict(
        obs=obs,
        actions=actions,
        rewards=rewards,
        terminated=terminated,
        truncated=truncated,
        next_obs=true_next_obs(next_obs, info),
    )
    if LIFE_LOST in info:  # Atari: the learner decides whether a lost life ends an episode
        step[LIFE_LOST] = info[LIFE_LOST] & info[f"_{LIFE_LOST}"]
    learner.observe(**step, **extras)
    return next_obs, info
