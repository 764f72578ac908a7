"""The learner: memory, the compiled update, its optimizer and its state.

A learner takes what actors observed (``observe``), learns in one compiled
call per update (``update``), and publishes versioned policy weights
(``publish``) that any actor can load. Each update's compiled call also
returns the new acting weights, so publishing costs no extra call into
TensorFlow. What is shared by every learner lives here (``Learner``'s docstring
is the contract between it and an algorithm). Each algorithm's learner subclasses
``Learner`` once, in its own module, and holds a ``Memory``: the rollout of
``rollouts.py`` or the replay feed of ``off_policy.py``.
"""

import dataclasses
import functools
import json
import math
from typing import Callable, Dict, List, Optional, Protocol, Sequence, Tuple

import gymnasium as gym
import numpy as np

from rl import registry, seeding
from rl._tf import tf
from rl.agents.actor import PolicySnapshot
from rl.agents.optimizers import build_optimizer
from rl.algos.grad_comp.checks import weighted_mean
from rl.algos.normalization import ReturnScaler, RunningMeanStd
from rl.algos.schedules import constant_schedule, linear_schedule
from rl.counters import Counters
from rl.envs.atari import LIFE_LOST
from rl.hparams.base import HParams, ReturnNormalization, RewardSettings
from rl.models.settings import ModelSettings


class NonFiniteError(ArithmeticError):
    """An update produced a non-finite loss or weights; ``str()`` is one line.

    Attributes:
        metrics: that update's metrics as it computed them (NaN and inf included), so a
            result reports the update that stopped training, not an earlier one.
    """

    def __init__(self, message: str, metrics: Optional[Dict[str, float]] = None):
        super().__init__(message)
        self.metrics = dict(metrics or {})


@dataclasses.dataclass
class Batch:
    """What a memory hands the update: its data and what the learner reads beside it."""

    data: Dict[str, tf.Tensor]  # the compiled update's input (``Memory.specs``)
    first_step: int  # the env step the learning-rate schedule is read at
    info: Dict[str, float]  # logged beside the update's metrics
    indices: Optional[np.ndarray] = None  # where a replay holds the sampled transitions


class Memory(Protocol):
    """What a learner keeps of the observed steps until it learns from them."""

    # Per-example values the compiled update returns for the memory (``learned``),
    # e.g. a prioritised replay's new "priorities"; () for none.
    feedback: Tuple[str, ...]

    def record(self, step: Dict[str, np.ndarray], episode_goes_on: Optional[np.ndarray]) -> None:
        """Keeps one vectorised step (``Learner.observe``'s, rewards as learned from).

        Args:
            step: as ``observe`` takes it, ``terminated`` as learned from.
            episode_goes_on: [N] bool or None: steps terminal for learning only (a
                lost life) after which the env's episode, and its observations, go on.
        """

    def round_steps(self) -> int:
        """Vectorised steps an actor process plays per round (--num_workers)."""

    def rollout_size(self) -> int:
        """Env steps of a rollout for memories learned from whole (0 for the others)."""

    def pending_steps(self) -> int:
        """Env steps kept but held outside checkpoints (a partial rollout)."""

    def end_streams(self, env_ids: Sequence[int]) -> None:
        """These env copies were reset mid-episode: their held episodes end there."""

    def separate_state(self) -> Dict[str, object]:
        """State saved beside each checkpoint in files of its own (a replay), by name."""

    def next_batch(self, steps: int) -> Optional[Batch]:
        """The update's next batch if one is due after ``steps`` env steps, else None."""

    def specs(self) -> Dict[str, tf.TensorSpec]:
        """What ``next_batch`` gives as ``data``, for tracing the update before the first."""

    def learned(self, batch: Batch, feedback: Dict[str, np.ndarray]) -> None:
        """Takes a finite update's ``feedback`` values on ``batch`` (new priorities)."""


class Learner(tf.Module):
    """What every learner shares: model, loss, optimizer, update stream, counters.

    The contract with an algorithm. The base owns the update's frame:

    - ``update``: asks ``memory.next_batch`` for a batch (None: nothing to learn yet),
      reads the learning-rate schedule where the batch's data begins, and runs the
      compiled update once: it assigns that rate to every ``scheduled_optimizers()``,
      runs ``learn``, and returns the metrics, whether the weights are finite and the
      new acting weights; then ``_finish_update`` counts the update, refuses
      non-finite values, publishes the snapshot, and the memory takes its feedback.
    - ``warm_up``: traces that compiled call on ``memory.specs()``.
    - stepping the optimiser: ``minimize`` (one gradient step, split over replicas),
      ``burst`` (one gradient step on each [B, ...] batch of a [G, B, ...] burst) and
      ``run_gradient_steps`` (any count of steps in one tf.while_loop);
    - target networks: ``build_target`` (a copy of the model), ``sync_target(tau)``
      (tau 1: a copy) and ``sync_target_every`` (every N gradient steps);
    - observing, counting, publishing, checkpoint items (``target_model`` included).

    An algorithm provides, in its own module, so its update reads top to bottom there:

    - ``__init__``: ``super().__init__``, then ``self.memory`` (a ``RolloutMemory`` or a
      ``ReplayFeed``), ``self.build_target()`` if its loss reads a target network, and
      the optimizers it adds;
    - ``learn(data, updates_before)``: the compiled update's body on ``memory``'s
      ``data`` (GAE and epochs of minibatches, a burst of TD steps, ...), returning
      scalar metrics (plus the ``memory.feedback`` values it owes the memory);
    - the losses it minimises (``_loss``), through ``self.grad_comp``, the loss
      ``hp.grad_comp`` names;
    - if needed: ``scheduled_optimizers`` (more optimizers the schedule steers),
      ``logged_beside`` (values logged with each update), ``exploration_schedule``,
      ``warnings`` and ``checkpoint_items`` (more state).
    """

    memory: Memory
    # What its actors record beside each action (rl/agents/actor.py ACTOR_EXTRAS).
    actor_extras: Tuple[str, ...] = ()
    # Actors must act with the weights of the latest update (PPO); False: they
    # may run ahead of the learner by a round (DQN, IMPALA).
    on_policy: bool = False
    # A copy of the model that targets are read from (``build_target``), or None.
    target_model = None

    def __init__(self, hp: HParams, observation_space: gym.Space, action_space: gym.Space):
        """Builds the model, loss, optimizer and the update's random stream from ``hp``.

        Args:
            hp: the agent's hparams.
            observation_space: the env's observation space (rl.envs wrappers applied).
            action_space: the env's action space.
        """
        super().__init__(name=hp.agent)
        self.hp = hp
        self.observation_space = observation_space
        self.action_space = action_space
        self.model = self.build_model()
        self.grad_comp = registry.grad_comp.get(hp.grad_comp)
        self.generator = tf.random.Generator.from_seed(
            seeding.derived_seed(hp.seed, seeding.UPDATE)
        )
        # The --sys target's strategy (built inside its scope): updates spread over its replicas.
        self.strategy = tf.distribute.get_strategy()
        self.optimizer = build_optimizer(hp, hp.learning_rate)
        # Built now so checkpoints restore into existing slots.
        self.optimizer.build(self.model.trainable_variables)
        self.counters = Counters(env_steps=0, updates=0)
        self.observation_stats = self._observation_stats()
        rewards = hp if isinstance(hp, RewardSettings) else RewardSettings()
        self.sign_rewards = rewards.sign_rewards
        self.reward_scale = rewards.reward_scale
        self.life_loss_terminal = rewards.life_loss_terminal
        self.return_scaler = None
        if isinstance(hp, ReturnNormalization) and hp.normalize_rewards:
            self.return_scaler = ReturnScaler(hp.num_envs, hp.gamma, hp.reward_clip)
        self._acting_variables = self.model.acting_variables()
        self._snapshot = self._take_snapshot()
        self._compiled_update = self.compile_update(self._update_step)

    def _observation_stats(self) -> Optional["RunningStatsState"]:
        """The running observation statistics a normalising model needs, or None."""
        if not (isinstance(self.hp, ModelSettings) and self.hp.normalize_observations):
            return None
        if getattr(self.model, "normalizer", None) is None:
            raise ValueError(
                f"model {self.hp.model} does not normalise observations; "
                "set normalize_observations=false"
            )
        return RunningStatsState(RunningMeanStd(self.observation_space.shape))

    def build_model(self):
        """A fresh network of this learner's kind (also what graph actors act with)."""
        hp = self.hp
        model_class = registry.models.get(hp.model)
        return model_class(hp, self.observation_space, self.action_space, seed=hp.seed)

    # --- what the loop calls --------------------------------------------------
    @property
    def env_steps(self) -> int:
        """Environment steps observed so far, all env copies together."""
        return self.counters["env_steps"]

    @classmethod
    def exploration_schedule(cls, hp: HParams) -> Callable[[int], float]:
        """epsilon as a function of the env step, for act_selects that use one.

        A picklable function of TensorFlow-free modules: actor processes
        evaluate it without importing the learner. Default: always 0.
        """
        return functools.partial(constant_schedule, 0.0)

    @classmethod
    def exploration(cls, hp: HParams, step: int) -> float:
        """epsilon at env step ``step``, the mean over env copies where each has its own."""
        return float(np.mean(cls.exploration_schedule(hp)(step)))

    def round_steps(self) -> int:
        """Vectorised steps an actor process plays per round (--num_workers):
        a PPO rollout; for off-policy learners about one update's worth of data."""
        return self.memory.round_steps()

    def observe(self, **step: np.ndarray) -> None:
        """Records one vectorised step of N transitions.

        Observation statistics take the step's observations; rewards are signed,
        scaled and normalised as the hparams say before ``record`` keeps them.

        Args:
            **step: obs, actions, rewards, terminated, truncated, next_obs
                (the true next observations: final ones at episode ends),
                each [N, ...], the actor's extras (``actor_extras``), and for
                Atari ``life_lost`` [N] (terminal with ``life_loss_terminal``).
        """
        life_lost = step.pop(LIFE_LOST, None)
        episode_goes_on = None
        if life_lost is not None and self.life_loss_terminal:
            episode_goes_on = life_lost & ~(step["terminated"] | step["truncated"])
            step["terminated"] = step["terminated"] | life_lost
        if self.observation_stats is not None:
            self.observation_stats.stats.update(step["obs"])
        rewards = step["rewards"]
        if self.sign_rewards:
            rewards = np.sign(rewards).astype(np.float32)
        if self.reward_scale != 1.0:
            rewards = rewards * np.float32(self.reward_scale)
        if self.return_scaler is not None:
            rewards = self.return_scaler(rewards, step["terminated"] | step["truncated"])
        self.memory.record({**step, "rewards": rewards}, episode_goes_on)
        self.counters.add("env_steps", len(rewards))

    def update(self) -> Optional[Dict[str, float]]:
        """Learns if enough has been observed; returns metrics, or None if not.

        One compiled call on the memory's next batch, the learning rate read where
        its data begins; only a finite update's feedback reaches the memory.
        """
        steps = self.env_steps
        batch = self.memory.next_batch(steps)
        if batch is None:
            return None
        learning_rate = self.learning_rate(batch.first_step)
        *outputs, feedback = self._compiled_update(
            batch.data,
            tf.constant(learning_rate, tf.float32),
            tf.constant(self.counters["updates"], tf.int64),
        )
        result = self._finish_update(
            outputs, learning_rate=learning_rate, **batch.info, **self.logged_beside(steps)
        )
        if feedback:
            self.memory.learned(batch, {k: v.numpy() for k, v in feedback.items()})
        return result

    def warm_up(self) -> None:
        """Traces the update for the batches to come, without running it.

        The first update otherwise traces it (seconds) while actor processes,
        which may play only a few rounds ahead, wait; called as they start,
        the trace overlaps their start-up. Nothing is learned or changed. An
        XLA update (``jit_compile``) still compiles at its first run.
        """
        self._compiled_update.get_concrete_function(
            self.memory.specs(), tf.TensorSpec((), tf.float32), tf.TensorSpec((), tf.int64)
        )

    def logged_beside(self, steps: int) -> Dict[str, float]:
        """Values logged with the update made at env step ``steps`` (DQN: its epsilon)."""
        del steps
        return {}

    # --- what an algorithm provides -----------------------------------------------
    def learn(self, data: Dict[str, tf.Tensor], updates_before: tf.Tensor) -> Dict[str, tf.Tensor]:
        """The compiled update's body: every gradient step on one batch of the memory.

        Args:
            data: the memory's batch (``Memory.specs``).
            updates_before: int64 scalar, the updates made before this one.

        Returns:
            Scalar metrics, and the ``memory.feedback`` values under their names.
        """
        raise NotImplementedError

    def scheduled_optimizers(self) -> List:
        """The optimizers whose rate the learning-rate schedule sets at each update."""
        return [self.optimizer]

    def break_streams(self, env_ids: Sequence[int]) -> None:
        """These env copies were reset mid-episode (a resumed run, a restarted
        actor process): what is held of their current episodes ends there.

        Args:
            env_ids: indices of the env copies, as in ``observe``'s arrays.
        """
        if self.return_scaler is not None:
            self.return_scaler.break_streams(env_ids)
        self.memory.end_streams(env_ids)

    def rollout_size(self) -> int:
        """Env steps of a rollout, for learners that learn from whole rollouts only
        (training runs on to the end of one); 0 for the others."""
        return self.memory.rollout_size()

    def pending_steps(self) -> int:
        """Env steps observed but held outside checkpoints (e.g. a partial rollout).

        Evaluations and checkpoints wait until this is 0, so a resumed run
        never loses or repeats learning.
        """
        return self.memory.pending_steps()

    def warnings(self, metrics: Dict[str, float]) -> List[str]:
        """Signs in an update's metrics that learning went wrong while staying finite."""
        del metrics
        return []

    def publish(self) -> PolicySnapshot:
        """The current acting weights, versioned by the update count."""
        return self._snapshot

    def refresh_snapshot(self) -> None:
        """Re-reads the acting weights from the variables (after a restore)."""
        self._snapshot = self._take_snapshot()

    def _take_snapshot(self) -> PolicySnapshot:
        arrays = tuple(v.numpy() for v in self._acting_variables)
        return PolicySnapshot(self.counters["updates"], arrays)

    def learning_rate(self, step: int) -> float:
        """The learning rate for data that starts at env step ``step``.

        Annealing counts from the first step of the data being learned from
        (a PPO rollout's first step), so the last update of a run does not
        get a rate of ~0.
        """
        hp = self.hp
        if not hp.anneal_learning_rate:
            return hp.learning_rate
        return linear_schedule(hp.learning_rate, 0.0, max(hp.train_steps, 1), step)

    def next_seed(self) -> tf.Tensor:
        """A fresh stateless seed [2] int32 from the update's generator.

        Random ops in an update take one (``tf.random.stateless_*``): the generator's
        own draws differ under a distribution strategy, its seeds do not.
        """
        return tf.cast(self.generator.make_seeds(1)[:, 0], tf.int32)

    def _update_step(
        self, data: Dict[str, tf.Tensor], learning_rate: tf.Tensor, updates_before: tf.Tensor
    ):
        """The compiled update: the rate assigned, ``learn``, then what it returns."""
        for optimizer in self.scheduled_optimizers():
            optimizer.learning_rate.assign(learning_rate)
        metrics = self.learn(data, updates_before)
        feedback = {name: metrics.pop(name) for name in self.memory.feedback}
        return (*self._update_outputs(metrics), feedback)

    def compile_update(self, update_step: Callable) -> Callable:
        """The update as one compiled call, XLA-compiled if ``hp.jit_compile``.

        Loops inside are explicit tf.while_loops, so autograph's source
        transformation (~1 s of start-up) is not needed. With several replicas
        the strategy places the work on its devices (XLA cannot compile one
        function over variables on several devices; TPUStrategy compiles each
        replica's part with XLA itself).
        """
        jit = self.hp.jit_compile and self.strategy.num_replicas_in_sync == 1
        return tf.function(update_step, jit_compile=jit, autograph=False)

    def check_divisible(self, what: str, size: int) -> None:
        """Refuses a batch that cannot be split equally over the strategy's replicas.

        Raises:
            ValueError: naming the batch, its size and the replica count.
        """
        replicas = self.strategy.num_replicas_in_sync
        if size % replicas:
            raise ValueError(
                f"{what} = {size} must be divisible by the {replicas} replicas of this --sys target"
            )

    # --- one gradient step, on one device or split over several --------------------
    def minimize(
        self,
        loss_fn: Callable[[Dict[str, tf.Tensor]], Tuple[tf.Tensor, Dict[str, tf.Tensor]]],
        data: Dict[str, tf.Tensor],
        batch_axis: int = 0,
        variables: Optional[Sequence[tf.Variable]] = None,
        optimizer=None,
        keep: Sequence[str] = (),
    ) -> Tuple[tf.Tensor, tf.Tensor, Dict[str, tf.Tensor]]:
        """One gradient step on the mean of ``loss_fn``'s per-example losses.

        With several replicas (--sys mirrored, tpu) each takes an equal slice of
        ``data`` along ``batch_axis``; its losses are summed and divided by the
        global batch, the gradients summed over replicas, then clipped once, so
        the step is the one a single device takes on the whole batch.

        Args:
            loss_fn: data -> (per-example losses, extras of per-example values).
            data: tensors that share the batch axis.
            batch_axis: 0, or 1 for time-major [T, B] data.
            variables: what to train (default: the model's trainable variables).
            optimizer: what steps them (default: the learner's).
            keep: extras returned per example (in batch order) instead of as means,
                e.g. the new priorities of a prioritised replay.

        Returns:
            The mean loss, the gradients' global norm before clipping, the extras'
            means (those in ``keep`` per example).
        """
        variables = self.model.trainable_variables if variables is None else variables
        optimizer = optimizer or self.optimizer
        if self.strategy.num_replicas_in_sync == 1:
            with tf.GradientTape() as tape:
                loss, extras = loss_fn(data)
                mean_loss = weighted_mean(loss)
            grads = tape.gradient(mean_loss, variables)
            means = {k: v if k in keep else tf.reduce_mean(v) for k, v in extras.items()}
        else:
            mean_loss, grads, means = self._replica_gradients(
                loss_fn, data, batch_axis, variables, keep
            )
        grads, grad_norm = clip_gradients(grads, self.hp.max_grad_norm)
        optimizer.apply_gradients(zip(grads, variables))
        return mean_loss, grad_norm, means

    def _replica_gradients(self, loss_fn, data, batch_axis, variables, keep):
        """Sums over replicas of the loss, its gradients and extras, each / global batch;
        the extras in ``keep`` gathered per example instead."""
        strategy = self.strategy
        replicas = strategy.num_replicas_in_sync

        def shard(x, i):
            n = tf.shape(x)[batch_axis] // replicas
            return x[i * n : (i + 1) * n] if batch_axis == 0 else x[:, i * n : (i + 1) * n]

        def replica_step(data):
            i = tf.distribute.get_replica_context().replica_id_in_sync_group
            with tf.GradientTape() as tape:
                loss, extras = loss_fn({k: shard(v, i) for k, v in data.items()})
                total = tf.cast(tf.size(loss) * replicas, tf.float32)
                scaled = tf.reduce_sum(loss) / total
            grads = tape.gradient(scaled, variables)
            return (
                scaled,
                grads,
                {k: v if k in keep else tf.reduce_sum(v) / total for k, v in extras.items()},
            )

        scaled, grads, extras = strategy.run(replica_step, args=(data,))

        def summed(x):
            return strategy.reduce(tf.distribute.ReduceOp.SUM, x, axis=None)

        return (
            summed(scaled),
            [summed(g) for g in grads],
            {
                k: strategy.gather(v, axis=batch_axis) if k in keep else summed(v)
                for k, v in extras.items()
            },
        )

    def burst(
        self,
        data: Dict[str, tf.Tensor],
        updates_before: tf.Tensor,
        gradient_step: Callable[[Dict[str, tf.Tensor], tf.Tensor], Dict[str, tf.Tensor]],
        names: Sequence[str],
        collect: Sequence[str] = (),
    ) -> Dict[str, tf.Tensor]:
        """``gradient_step`` on each [B, ...] batch of a burst's [G, B, ...] ``data``.

        Args:
            data: tensors [G, B, ...], one batch per gradient step.
            updates_before: int64 scalar; each update is a burst of G steps.
            gradient_step: (batch [B, ...], gradient steps done after this one) -> metrics.
            names: the metrics to average, as ``run_gradient_steps`` takes them.
            collect: the values kept from every step, as ``run_gradient_steps`` takes them.
        """
        count = tf.shape(next(iter(data.values())))[0]
        done_before = updates_before * tf.cast(count, tf.int64)

        def step(g):
            done = done_before + tf.cast(g, tf.int64) + 1  # gradient steps after this one
            return gradient_step({name: value[g] for name, value in data.items()}, done)

        return run_gradient_steps(count, step, names, collect)

    # --- target networks ------------------------------------------------------------
    def build_target(self) -> None:
        """``target_model``: a copy of the model (saved in checkpoints), synced to it now."""
        self.target_model = self.build_model()
        self.sync_target(1.0)

    def sync_target(self, tau) -> tf.Tensor:
        """target <- tau * online + (1 - tau) * target; returns True (for tf.cond)."""
        return soft_update(self.target_model.variables, self.model.variables, tau)

    def sync_target_every(self, done: tf.Tensor, interval: int, tau) -> tf.Tensor:
        """``sync_target(tau)`` when ``done`` gradient steps are a multiple of ``interval``;
        returns whether it synced."""
        return tf.cond(
            tf.equal(done % interval, 0),
            lambda: self.sync_target(tau),
            lambda: tf.constant(False),
        )

    # --- the compiled update's ends -----------------------------------------------
    def _update_outputs(self, metrics: Dict[str, tf.Tensor]):
        """What every compiled update returns: its metrics, whether all weights
        are finite, and the new values of the weights acting reads."""
        finite = tf.reduce_all(
            [tf.reduce_all(tf.math.is_finite(v)) for v in self.model.trainable_variables]
        )
        weights = [v.read_value() for v in self._acting_variables]
        return metrics, finite, weights

    def _finish_update(self, outputs, **more: float) -> Dict[str, float]:
        """Takes a compiled update's outputs: the finite check, metrics, a new snapshot.

        Raises:
            NonFiniteError: a loss or a weight is NaN or infinite; the weights
                are then unusable and must not be saved or published.
        """
        metrics, finite, weights = outputs
        updates = self.counters.add("updates")
        result = {k: float(v) for k, v in metrics.items()}
        bad = sorted(k for k, v in result.items() if not math.isfinite(v))
        if bad or not bool(finite):
            what = f"non-finite {', '.join(bad)}" if bad else "non-finite weights"
            raise NonFiniteError(
                f"{what} in update {updates} at step {self.env_steps}", {**result, **more}
            )
        self._snapshot = PolicySnapshot(updates, tuple(w.numpy() for w in weights))
        if self.observation_stats is not None:
            self._assign_observation_stats()
        result.update(more)
        return result

    def _assign_observation_stats(self) -> None:
        """The model (and the published weights) take the running observation statistics.

        After each update: a rollout is acted, and then learned from, with the same
        statistics; the next one acts with the new ones.
        """
        stats = self.observation_stats.stats
        mean, var = self.model.normalizer.assign(stats.mean, stats.var)
        arrays = (mean, var, *self._snapshot.arrays[2:])  # first among acting variables
        self._snapshot = PolicySnapshot(self._snapshot.version, arrays)

    # --- saving -----------------------------------------------------------------
    def checkpoint_items(self) -> Dict[str, tf.Module]:
        """Everything a resumed learner needs, by checkpoint key."""
        items = {
            "model": self.model,
            "optimizer": self.optimizer,
            "generator": self.generator,
            "counters": self.counters,
        }
        if self.observation_stats is not None:
            items["observation_stats"] = self.observation_stats
        if self.return_scaler is not None:
            items["return_stats"] = RunningStatsState(self.return_scaler.stats)
        if self.target_model is not None:
            items["target_model"] = self.target_model
        return items

    def separate_state(self) -> Dict[str, object]:
        """State saved beside the checkpoint in files of its own (a replay), by name."""
        return self.memory.separate_state()


class RunningStatsState(tf.train.experimental.PythonState):
    """A RunningMeanStd inside tf.train checkpoints, restored exactly (float64 as JSON)."""

    def __init__(self, stats: RunningMeanStd):
        self.stats = stats

    def serialize(self) -> bytes:
        return json.dumps(self.stats.state()).encode()

    def deserialize(self, data: bytes) -> None:
        self.stats.load_state(json.loads(data))


def run_gradient_steps(
    count: int,
    step: Callable[[tf.Tensor], Dict[str, tf.Tensor]],
    names: Sequence[str],
    collect: Sequence[str] = (),
) -> Dict[str, tf.Tensor]:
    """Runs ``step(i)`` for i = 0..count-1 in one tf.while_loop; returns the metrics' means.

    Every learner's update is "G gradient steps in one compiled call"; a
    Python loop would be unrolled into the graph (slow to trace for many steps).

    Args:
        count: how many steps (a Python int or a scalar tensor).
        step: builds one gradient step from its index; returns scalar metrics.
        names: the metrics to average (keys of ``step``'s result).
        collect: float32 values of ``step``'s result kept from every step,
            returned stacked [count, ...] under their names.
    """
    totals = {name: tf.constant(0.0) for name in names}
    kept = {name: tf.TensorArray(tf.float32, size=count) for name in collect}

    def body(i, totals, kept):
        metrics = step(i)
        return (
            i + 1,
            {name: totals[name] + metrics[name] for name in names},
            {name: kept[name].write(i, metrics[name]) for name in collect},
        )

    _, totals, kept = tf.while_loop(lambda i, *_: i < count, body, (tf.constant(0), totals, kept))
    results = {name: total / tf.cast(count, tf.float32) for name, total in totals.items()}
    results.update({name: array.stack() for name, array in kept.items()})
    return results


def soft_update(targets: Sequence[tf.Variable], onlines: Sequence[tf.Variable], tau) -> tf.Tensor:
    """target <- tau * online + (1 - tau) * target, pairwise; returns True (for tf.cond)."""
    for target, online in zip(targets, onlines):
        target.assign(tau * online + (1.0 - tau) * target)
    return tf.constant(True)


def clip_gradients(grads, max_norm: Optional[float]):
    """Global-norm clipping; returns the clipped grads and the norm before."""
    norm = tf.linalg.global_norm(grads)
    if max_norm is not None:
        grads, _ = tf.clip_by_global_norm(grads, max_norm, use_norm=norm)
    return grads, norm
