"""A long peer run's saves (--peer_checkpoints): the folder is tied to one run (set, seed,
steps and the peer's settings), and the run resumes from its newest save that loads."""

import json
import os
import re
import sys
import zipfile
from typing import Dict, List, Optional, Tuple

from rl.files import read_json_object, write_text_atomic
from scripts.bench import children, peer_settings


def peer_saves(folder: str) -> List[Tuple[int, str]]:
    """(env steps, file name) of the peer models ``CheckpointCallback`` saved in
    ``folder`` (prefix "peer"), oldest first; [] for a missing folder."""
    if not os.path.isdir(folder):
        return []
    return sorted(
        (int(m.group(1)), name)
        for name in os.listdir(folder)
        for m in [re.fullmatch(r"peer_(\d+)_steps\.zip", name)]
        if m
    )


# In a --peer_checkpoints folder: the peer run its saves belong to (set, seed, steps).
PEER_MANIFEST = "peer_run.json"


def claim_peer_folder(folder: str, run: Dict[str, object]) -> None:
    """Ties ``folder`` to one peer run: records the run on first use; refuses (exit 2) a
    folder recorded for another run, or holding another run's saves.

    The steps are part of the run: SB3's schedules (learning rate, exploration) run over
    the total it was asked to learn.

    Args:
      folder: the --peer_checkpoints folder.
      run: {"set": ..., "seed": ..., "steps": ...} of this run.
    """
    recorded = read_peer_manifest(folder)
    if recorded is not None and recorded != run:
        children.fail(
            f"--peer_checkpoints {folder} holds the saves of {describe_peer_run(recorded)}, "
            f"not {describe_peer_run(run)}; give another folder"
        )
    # Also with a manifest: saves of this set, seed and steps made before the peer's
    # settings changed (the DDPG peer's batch) are another run.
    check_saves_fit(folder, run, recorded=recorded is not None)
    if recorded is None:
        os.makedirs(folder, exist_ok=True)
        write_text_atomic(os.path.join(folder, PEER_MANIFEST), json.dumps(run) + "\n")


def describe_peer_run(run: Dict[str, object]) -> str:
    """A peer run as a message names it: "SET seed SEED for STEPS steps"."""
    return f"{run['set']} seed {run['seed']} for {run['steps']} steps"


def read_peer_manifest(folder: str) -> Optional[Dict[str, object]]:
    """The run recorded in ``folder``'s manifest; None if it has none (exit 2 if damaged)."""
    path = os.path.join(folder, PEER_MANIFEST)
    if not os.path.exists(path):
        return None
    try:
        run = read_json_object(path)
        if set(run) != {"set", "seed", "steps"}:
            raise ValueError(f"{path} holds {sorted(run)}; expected the keys set, seed and steps")
    except OSError as e:
        children.fail(f"--peer_checkpoints {folder}: {PEER_MANIFEST} cannot be read ({e.strerror})")
    except ValueError as e:
        children.fail(
            f"--peer_checkpoints {folder}: {e}; if the saves are of SET SEED STEPS, write "
            '{"set": SET, "seed": SEED, "steps": STEPS} to it'
        )
    return run


def check_saves_fit(folder: str, run: Dict[str, object], recorded: bool) -> None:
    """The saves in ``folder`` are resumed only if the newest readable one has this run's
    seed, steps, policy and the peer's settings; else the process ends (exit 2).

    Args:
      folder: the --peer_checkpoints folder.
      run: {"set": ..., "seed": ..., "steps": ...} of this run.
      recorded: the folder's manifest names this run; then saves that do not read are
        left to ``resume_peer``, which starts afresh if none loads.
    """
    saves = peer_saves(folder)
    if not saves:
        return
    saved = newest_save_data(folder, saves)
    if saved is None:
        if recorded:
            return
        children.fail(
            f"--peer_checkpoints {folder} holds peer saves that cannot be read and no "
            f"{PEER_MANIFEST} saying whose they are; move them away or give another folder"
        )
    peer = peer_settings.PEERS[str(run["set"])]
    policy = peer_settings.peer_algorithm(peer).policy_aliases["MlpPolicy"].__module__
    differences = save_differences(saved, peer, run, policy)
    if differences:
        more = f"; and {len(differences) - 3} more" if len(differences) > 3 else ""
        children.fail(
            f"--peer_checkpoints {folder} holds the saves of another run than "
            f"{describe_peer_run(run)} ({'; '.join(differences[:3])}{more}); give another folder"
        )


def newest_save_data(folder: str, saves: List[Tuple[int, str]]) -> Optional[dict]:
    """The settings SB3 stored (the zip's "data" JSON) in the newest save that reads."""
    for _, name in reversed(saves):
        try:
            with zipfile.ZipFile(os.path.join(folder, name)) as archive:
                data = json.loads(archive.read("data"))
        except (OSError, KeyError, ValueError, zipfile.BadZipFile):
            continue  # cut short by a kill: the one before tells as well
        if isinstance(data, dict):
            return data
    return None


def save_differences(
    saved: dict, peer: peer_settings.Peer, run: Dict[str, object], policy_module: str
) -> List[str]:
    """How a save's stored settings differ from those of ``run``'s peer; [] if they agree.

    Args:
      saved: the "data" JSON of an SB3 save.
      peer: the peer of the run's set.
      run: {"set", "seed", "steps"} of the run.
      policy_module: the module of the peer algorithm's MlpPolicy class.
    """
    expected = {
        "seed": run["seed"],
        "steps": run["steps"],
        "n_envs": peer.n_envs or 1,
        **{k: v for k, v in peer.settings.items() if isinstance(v, (int, float, str))},
    }
    # SB3 stores the total it was asked to learn as _total_timesteps.
    found = {key: saved.get("_total_timesteps" if key == "steps" else key) for key in expected}
    differences = [
        f"{k} {brief(found[k])}, not {brief(v)}"
        for k, v in expected.items()
        # SB3 stores some settings as objects (DQN's train_freq 256 as a pickled
        # TrainFreq): those cannot be compared from the JSON, so they are not.
        if found[k] != v and not isinstance(found[k], dict)
    ]
    saved_policy = (saved.get("policy_class") or {}).get("__module__")
    if saved_policy != policy_module:
        differences.insert(0, f"policy of {saved_policy}, not {policy_module}")
    return differences


def brief(value: object) -> str:
    """A stored setting for a one-line message (SB3 stores objects as pickled dicts)."""
    return "an object" if isinstance(value, dict) else repr(value)


def resume_peer(model, folder: str):
    """The peer saved last in ``folder`` (model, replay, normalisation), or ``model``
    itself when nothing there loads; and the env steps it had learned.

    A save cut short by a kill leaves a file that does not load: the one before is used.

    Args:
      model: the untrained peer, built as the saved one was.
      folder: where ``CheckpointCallback`` saved it (prefix "peer").
    """
    # The bench extra: loaded in the peer process only.
    from stable_baselines3.common.vec_env import VecNormalize

    for steps, name in reversed(peer_saves(folder)):
        replay = os.path.join(folder, f"peer_replay_buffer_{steps}_steps.pkl")
        statistics_path = os.path.join(folder, f"peer_vecnormalize_{steps}_steps.pkl")
        try:
            envs = model.get_env()
            if os.path.exists(statistics_path):
                envs = VecNormalize.load(statistics_path, envs.venv)
            loaded = type(model).load(os.path.join(folder, name), env=envs, device="cpu")
            if hasattr(loaded, "replay_buffer"):
                loaded.load_replay_buffer(replay)
        except Exception as e:  # noqa: BLE001  (any damage: fall back to the save before)
            print(
                f"peer: {name} does not load ({type(e).__name__}); trying the one before",
                file=sys.stderr,
            )
            continue
        return loaded, steps
    return model, 0
