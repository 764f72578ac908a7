"""The peer over rl's seeds (--suite classic --peer_seeds N): each seed of a set's peer
trained as its rl copies are (the set's budget, evaluations and the copies' seeds), one
process per seed, resumed seed by seed; then peers/<set>/summary.json.

A seed's folder, <output_dir>/peers/<set>/seed_<S>, gets evaluations.json once the seed
has trained (peer_runs.peer_seed_run); a seed without it trains from scratch, one with it
is kept. summary.json holds, per seed in the order of ``seeds``, the final evaluation's
mean return and the best one's; the benchmark page reads it (field names are its interface).
"""

import importlib.metadata
import json
import os
from typing import Dict, List, Optional, Sequence

from rl import registry, seeding
from rl.files import read_json_object, write_text_atomic
from scripts.bench import children, columns, peer_runs, peer_settings

# rl.catalog is imported where used: it loads NumPy and Gymnasium, which the peer and cost
# processes (this same script) must not pay for in their wall time.


PEER_SEEDS_HEADER = f"{'set':<24} {'seed':>10} {'final':>8} {'best':>8} {'wall s':>7}  trained"


def peer_seed_list(name: str, count: int) -> List[int]:
    """The seeds of rl's ``--copies count`` of set ``name``, which its peer trains on."""
    from rl import catalog  # noqa: F401  (registers the sets; see the top)

    return seeding.copy_seeds(registry.hparams.get(name)().seed, count)


def seed_folder(output_dir: str, name: str, seed: int) -> str:
    """The folder of one seed of ``name``'s peer."""
    return os.path.join(peer_settings.suite_peer_dir(output_dir, name), f"seed_{seed}")


def sb3_version() -> str:
    """The installed Stable-Baselines3's version (without importing it and torch)."""
    return importlib.metadata.version("stable_baselines3")


def peer_seed_sets(only: Sequence[str], classic: Sequence[str]) -> List[str]:
    """The sets whose peer trains: the --only ones, else every classic set with a peer;
    a set without one ends the process (exit 2), naming the sets that have one."""
    with_peer = [name for name in classic if name in peer_settings.PEERS]
    missing = [name for name in only if name not in peer_settings.PEERS]
    if missing:
        children.fail(
            f"--peer_seeds: no Stable-Baselines3 peer for {', '.join(missing)}; the sets "
            f"with one: {', '.join(with_peer)}"
        )
    return list(only) or with_peer


def check_peer_seed_sets(names: Sequence[str]) -> None:
    """Ends the process (exit 2) for a set whose evaluations the peer cannot act as."""
    from rl import catalog  # noqa: F401  (registers the sets; see the top)

    for name in names:
        hp = registry.hparams.get(name)()
        if hp.eval_act_select not in peer_settings.EVAL_DETERMINISTIC or hp.eval_epsilon > 0:
            children.fail(
                f"--peer_seeds: {name} evaluates with {hp.eval_act_select} at epsilon "
                f"{hp.eval_epsilon:g}; the peer evaluates as "
                f"{' or '.join(peer_settings.EVAL_DETERMINISTIC)} at epsilon 0 only"
            )


def read_seed_result(folder: str, identity: Dict[str, object]) -> Optional[Dict[str, object]]:
    """A seed's evaluations.json, None when it has not finished; one that cannot be read
    or is of another run (``identity``: peer_runs.peer_seed_identity) ends the process
    (exit 2), so nothing is mixed into the summary or trained over it."""
    path = os.path.join(folder, peer_runs.EVALUATIONS_NAME)
    if not os.path.exists(path):
        return None
    try:
        result = read_json_object(path)
        found = {key: result.get(key) for key in identity}
        if not result["evaluations"]:
            raise ValueError(f"{path} holds no evaluations")
    except OSError as e:
        children.fail(f"{path} cannot be read ({e.strerror}); move it away to retrain the seed")
    except (ValueError, KeyError, TypeError) as e:
        children.fail(f"{path} is damaged ({e}); move it away to retrain the seed")
    if found != identity:
        differences = [
            f"{key} {found[key]!r}, not {value!r}"
            for key, value in identity.items()
            if found[key] != value
        ]
        children.fail(
            f"{path} is of another peer run ({'; '.join(differences)}); move it away to "
            "retrain the seed"
        )
    return result


def peer_summary(
    name: str, seeds: Sequence[int], results: Sequence[Dict[str, object]], command: str
) -> Dict[str, object]:
    """summary.json of a set's peer from its seeds' results (evaluations.json).

    Args:
      name: the rl set.
      seeds: the seeds, in the order of the copies.
      results: each seed's evaluations.json, in the order of ``seeds``.
      command: the command that reproduces the peer's runs.
    """
    first = results[0]
    returns = [[e["return_mean"] for e in r["evaluations"]] for r in results]
    return {
        "set": name,
        "name": first["peer"],
        "settings": first["settings"],
        "command": command,
        "train_steps": first["train_steps"],
        "eval_episodes": first["eval_episodes"],
        "seeds": list(seeds),
        "final_returns": [r[-1] for r in returns],
        "best_returns": [max(r) for r in returns],
        "wall_s": [r["wall_s"] for r in results],
    }


def peer_seeds_command(name: str, count: int, train_steps: Optional[int], output_dir: str) -> str:
    """The command that trains (or resumes) the ``count`` seeds of ``name``'s peer."""
    steps = "" if train_steps is None else f" --train_steps {train_steps}"
    return (
        f"python scripts/benchmark.py --suite classic --only {name} --peer_seeds {count}"
        f"{steps} --output_dir {output_dir}"
    )


def check_peer_seed_folders(
    output_dir: str, names: Sequence[str], count: int, train_steps: Optional[int]
) -> None:
    """Ends the process (exit 2), before any training, for a seed's evaluations.json that
    cannot be read or is of another run."""
    version = sb3_version()
    for name in names:
        for seed in peer_seed_list(name, count):
            identity = peer_runs.peer_seed_identity(name, seed, version, train_steps)
            read_seed_result(seed_folder(output_dir, name, seed), identity)


def run_peer_seeds(
    output_dir: str,
    names: Sequence[str],
    count: int,
    train_steps: Optional[int],
    shown_dir: str,
) -> List[Dict[str, object]]:
    """Trains the seeds of each set's peer not trained yet, one process at a time, printing
    a row per seed; then writes each set's peers/<set>/summary.json and returns the summaries.

    Args:
      output_dir: the suite's folder (absolute).
      names: the sets (each with a peer).
      count: seeds per set (those of rl's ``--copies count``).
      train_steps: env steps of each seed; None: each set's own.
      shown_dir: the folder as the user gave it, for the summary's command.
    """
    version = sb3_version()
    columns.print_header(PEER_SEEDS_HEADER)
    summaries = []
    for name in names:
        seeds = peer_seed_list(name, count)
        results = []
        for seed in seeds:
            folder = seed_folder(output_dir, name, seed)
            identity = peer_runs.peer_seed_identity(name, seed, version, train_steps)
            result = read_seed_result(folder, identity)
            trained = "earlier" if result is not None else "now"
            if result is None:
                os.makedirs(folder, exist_ok=True)
                command = children.benchmark_command("--_peer_seed", name, str(seed), folder)
                if train_steps is not None:
                    command += ["--train_steps", str(train_steps)]
                children.timed_run(command)
                result = read_seed_result(folder, identity)
                if result is None:
                    missing = f"it ended without writing {peer_runs.EVALUATIONS_NAME}"
                    raise children.ChildFailed(command, 1, missing)
            results.append(result)
            returns = [e["return_mean"] for e in result["evaluations"]]
            print(
                f"{name:<24} {seed:>10} {returns[-1]:>8.1f} {max(returns):>8.1f} "
                f"{result['wall_s']:>7.0f}  {trained}",
                flush=True,
            )
        summary = peer_summary(
            name, seeds, results, peer_seeds_command(name, count, train_steps, shown_dir)
        )
        path = os.path.join(
            peer_settings.suite_peer_dir(output_dir, name), peer_settings.PEER_SUMMARY_NAME
        )
        write_text_atomic(path, json.dumps(summary, indent=2) + "\n")
        summaries.append(summary)
    return summaries
