"""Policy artefacts: what acting needs from a checkpoint, and nothing else.

Every checkpoint of a run also writes ``policies/ckpt-<step>/``:

    policy.json     the run's hparams, the step and the snapshot's version
    weights.npz     the acting weights (the learner's published PolicySnapshot)
    saved_model/    a SavedModel of the evaluation policy (plain TensorFlow loads it)

``load_policy`` rebuilds an actor from the first two without the optimizer,
the critic's slots or the replay, so tournaments and serving can load many.
Artefacts are kept for every checkpoint ever written (they are small), so
a run's history stays playable after its checkpoints rotate.
"""

import functools
import io
import json
import os
import shutil
import zipfile
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from rl._tf import writes_as_oserror
from rl.errors import HParamsError
from rl.files import (
    RUN_DIR_VARIABLE,  # noqa: F401  (self-play and the experiment name it from here)
    checkpoint_name,
    fsync_dir,
    named_steps,
    read_json_object,
    write_bytes_atomic,
    write_text_atomic,
)

POLICIES_DIR = "policies"
POLICY_FILE = "policy.json"
WEIGHTS_FILE = "weights.npz"
SAVED_MODEL_DIR = "saved_model"


class PolicyArtefactError(ValueError):
    """A policy folder that is missing, incomplete or damaged; ``str()`` is one line."""


def artefact_dir(output_dir: str, step: int) -> str:
    return os.path.join(output_dir, POLICIES_DIR, checkpoint_name(step))


def write_policy_artefact(
    agent, output_dir: str, step: int, saved_model: bool = True, folder: Optional[str] = None
) -> str:
    """Writes the artefact of ``agent``'s current policy for checkpoint ``step``.

    The folder appears complete or not at all: it is built under a temporary
    name and renamed into place.

    Args:
        agent: an rl.agents.base.Agent.
        output_dir: the run folder.
        step: the checkpoint's step.
        saved_model: also write the SavedModel.
        folder: where (default ``policies/ckpt-<step>``; the best evaluation's goes
            inside its own folder, rl/best.py).

    Returns:
        The artefact folder.
    """
    final = folder or artefact_dir(output_dir, step)
    if os.path.isdir(final):  # re-saving the same step (a resumed, finished run)
        return final
    building = final + ".partial"
    shutil.rmtree(building, ignore_errors=True)
    os.makedirs(building)
    snapshot = agent.publish()
    buffer = io.BytesIO()
    np.savez(buffer, *snapshot.arrays)
    write_bytes_atomic(os.path.join(building, WEIGHTS_FILE), buffer.getvalue())
    if saved_model:
        with writes_as_oserror(f"the policy of step {step} in {output_dir}"):
            agent.policy_module().save(os.path.join(building, SAVED_MODEL_DIR))
    meta = {"step": step, "version": snapshot.version, "hparams": agent.hp.to_dict()}
    write_text_atomic(os.path.join(building, POLICY_FILE), json.dumps(meta, indent=2) + "\n")
    os.replace(building, final)
    fsync_dir(os.path.dirname(final))
    return final


def export_missing_policy(agent, output_dir: str, step: int) -> bool:
    """Writes the artefact of checkpoint ``step`` if policies/ lacks it: a kill after the
    checkpoint and before its export finished. A checkpoint and its artefact are one unit.

    Args:
        agent: an rl.agents.base.Agent holding checkpoint ``step`` (just restored).
        output_dir: the run folder (its half-built artefacts already removed).
        step: the checkpoint's step.

    Returns:
        Whether it wrote the artefact.
    """
    if os.path.isdir(artefact_dir(output_dir, step)):
        return False
    write_policy_artefact(agent, output_dir, step)
    return True


def tidy_policies(output_dir: str, restored_step: int) -> List[str]:
    """Makes policies/ agree with the checkpoint a run resumes from.

    Half-built folders (a kill while writing) are removed; artefacts past
    ``restored_step`` come from training that is about to be redone (their
    checkpoint was unreadable), so they move to ``policies/superseded/``
    instead of standing beside the new ones.

    Returns:
        The artefact folders moved aside.
    """
    from rl.run_folder import move_aside  # late: run_folder loads TensorBoard and Gymnasium

    folder = os.path.join(output_dir, POLICIES_DIR)
    if not os.path.isdir(folder):
        return []
    for name in os.listdir(folder):
        if name.endswith(".partial"):
            shutil.rmtree(os.path.join(folder, name), ignore_errors=True)
    later = [artefact_dir(output_dir, s) for s in policy_steps(output_dir) if s > restored_step]
    if later:
        move_aside(later, os.path.join(folder, "superseded"))
    return later


def policy_steps(output_dir: str) -> List[int]:
    """Steps of the complete policy artefacts of a run, oldest first."""
    return named_steps(os.path.join(output_dir, POLICIES_DIR))


def select_steps(steps: Sequence[int], every: Optional[int], latest: bool) -> List[int]:
    """The artefact steps a run enters with, oldest first.

    Args:
        steps: the run's artefact steps, oldest first.
        every: take every ``every``-th, counting from the oldest (1st, every+1-th, ...),
            so the selection only grows as the run trains on; None: all.
        latest: take only the newest.
    """
    if latest:
        return list(steps[-1:])
    return list(steps[:: every or 1])


def read_artefact(path: str) -> Dict[str, Any]:
    """policy.json and the weights of an artefact folder.

    Raises:
        PolicyArtefactError: naming the folder and what is wrong with it.
    """
    try:
        meta = read_json_object(os.path.join(path, POLICY_FILE))
        with np.load(os.path.join(path, WEIGHTS_FILE), allow_pickle=False) as saved:
            arrays = tuple(saved[f"arr_{i}"] for i in range(len(saved.files)))
    except FileNotFoundError as e:
        raise PolicyArtefactError(
            f"{path} is not a policy artefact ({os.path.basename(e.filename)} is missing)"
        ) from None
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:  # torn, say
        raise PolicyArtefactError(f"{path}: cannot read the policy artefact ({e})") from None
    if "hparams" not in meta:
        raise PolicyArtefactError(f"{path}/{POLICY_FILE} holds no hparams")
    meta["arrays"] = arrays
    return meta


def artefact_hparams(path: str, meta: Dict[str, Any]):
    """The hparams an artefact's policy.json holds, checked as a run's hparams.json is.

    Raises:
        PolicyArtefactError: naming the file and the first problem.
    """
    from rl.hparams.resolve import saved_hparams  # late: resolving loads Gymnasium

    try:
        return saved_hparams(meta["hparams"], os.path.join(path, POLICY_FILE))
    except HParamsError as e:
        raise PolicyArtefactError(str(e)) from None


def load_policy(path: str, explore: bool = False, seed: Optional[int] = None):
    """An actor acting with an artefact's weights (no optimizer, no replay).

    Args:
        path: a ``policies/ckpt-<step>`` folder, or the best evaluation's
            (``rl.best.best_policy_dir(run_dir)``).
        explore: act as the run's training actors did at the artefact's step: the
            training act_select, the exploration schedule's epsilon at that step
            (held there, whatever step ``act`` is given) and the run's action noise
            process; False: as evaluation does.
        seed: its random stream's seed (default: the run's seed).

    Returns:
        An rl.agents.actor.Actor; ``actor.to_env(actor.act(obs)[0])`` gives env actions.
    """
    # late: acting loads Gymnasium (and TensorFlow on first use); reading, writing and
    # tidying artefacts need neither
    from rl import registry, seeding
    from rl.agents.actor import PolicySnapshot, build_actor
    from rl.algos.schedules import constant_schedule
    from rl.envs import make_env

    meta = read_artefact(path)
    hp = artefact_hparams(path, meta)
    env = make_env(hp.env)
    spaces = (env.observation_space, env.action_space)
    env.close()
    exploration = None
    if explore:
        # Held at the artefact's step: a caller's own step count (from 0) would
        # restart a decaying epsilon at its first value.
        epsilon = registry.agents.get(hp.agent).exploration_schedule(hp)(int(meta["step"]))
        exploration = functools.partial(constant_schedule, epsilon)
    rng = seeding.stream(hp.seed if seed is None else seed, seeding.API)
    snapshot = PolicySnapshot(int(meta.get("version", 0)), meta["arrays"])
    try:
        return build_actor(hp, spaces, snapshot, rng, explore, exploration=exploration)
    except ValueError as e:  # weights of other shapes than the run's model
        raise PolicyArtefactError(f"{path}: {e}") from None


def load_host_policy(path: str, observation_space, action_space):
    """An artefact's greedy-or-sampling policy in NumPy, without TensorFlow: (HostPolicy, arrays).

    For MLP actor-critic (categorical) and Q-network models, the kinds self-play pools
    hold; ``tests/test_games.py`` checks it acts as ``load_policy``'s actor does.

    Args:
        path: a ``policies/ckpt-<step>`` folder.
        observation_space: one env copy's (flat) observation space.
        action_space: its Discrete action space.

    Raises:
        PolicyArtefactError: another kind of model, or weights that do not fit.
    """
    # late: the NumPy policy's modules load Gymnasium, as load_policy's do
    from rl.models.distributions import action_head
    from rl.models.host import HostPolicy, QHeadLayout, masked_actions
    from rl.models.settings import QHeadSettings

    meta = read_artefact(path)
    hp = artefact_hparams(path, meta)
    head = action_head(action_space)
    clip = hp.observation_clip if hp.normalize_observations else None
    if hp.torso != "mlp" or (isinstance(hp, QHeadSettings) and hp.noisy):
        raise PolicyArtefactError(f"{path}: only MLP, non-noisy models act in NumPy here")
    if hp.model == "actor_critic" and head.kind == "categorical":
        layout = None
    elif hp.model == "q_network":
        layout = QHeadLayout.from_settings(hp, int(action_space.n))
    else:
        raise PolicyArtefactError(
            f"{path}: a {hp.model} model cannot act in NumPy here (actor_critic with "
            "discrete actions or q_network only)"
        )
    try:
        masked = masked_actions(hp, head, observation_space)
    except ValueError as e:
        raise PolicyArtefactError(f"{path}: {e}") from None
    policy = HostPolicy(
        "distribution" if layout is None else "q_values",
        head,
        hp.activation,
        q_layout=layout,
        masked_actions=masked,
        observation_clip=clip,
    )
    arrays = meta["arrays"]
    try:  # one forward pass on a zero observation proves the shapes fit
        policy(np.zeros((1, *observation_space.shape), np.float32), arrays)
    except (ValueError, IndexError) as e:
        raise PolicyArtefactError(f"{path}: weights do not fit the env ({e})") from None
    return policy, arrays
