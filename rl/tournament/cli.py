"""``python -m rl.tournament``: the command line, its checks, and running the games.

    python -m rl.tournament RUN_DIR... [--players NAME...] --game GAME --games N
        --output_dir T [--every K | --latest] [--num_workers W] [--sys local|ray] [--seed S]

Bad input (an unknown game or player, a run folder without artefacts, fewer than
two players, N < 1, a folder holding another tournament) is one line on stderr
and exit code 2, before anything is written. A game that raises, a worker process
that dies, or one that sends nothing for --worker_timeout seconds while it owes
games (hung, or stopped by SIGSTOP: it is killed) stops the tournament with one
line and exit code 1; Ctrl-C stops it with code 130, SIGTERM with 143. Either way
the finished games stay in games.jsonl and the same command resumes.
"""

import argparse
import contextlib
import dataclasses
import math
import multiprocessing
import os
import signal
import sys
import time
from multiprocessing import connection
from typing import Dict, Iterator, List, NoReturn, Optional, Sequence

from rl import command_line, files, registry
from rl.command_line import float_in_range, int_in_range
from rl.errors import RunConflictError, SystemUnavailableError, error_line
from rl.fields import MAX_SEED
from rl.games.spec import GameSpec, check_game_name, make_game
from rl.processes import WORKER_TIMEOUT_SECONDS
from rl.registry import UnknownNameError
from rl.run_folder import check_output_dir
from rl.tournament import play, records, report, schedule
from rl.tournament.schedule import Entrant, GameKey, TournamentError
from rl.workers.ray_actors import connect, disconnect

PROG = "python -m rl.tournament"
SYSTEMS = ("local", "ray")
LOCK_FILE = ".lock"
MAX_CHUNK = 25  # games of one pair sent to a worker at once
EXIT_GAME_FAILED = 1
# Upper limits of the count flags, typo guards: games of one pair, and processes (or Ray
# tasks) playing at once.
MAX_GAMES = 1_000_000
MAX_WORKERS = 1024
MAX_WORKER_TIMEOUT = 86400.0  # a day


class Stopped(BaseException):
    """SIGINT (Ctrl-C) or SIGTERM asked the tournament to stop (a BaseException, as
    KeyboardInterrupt is: no ``except Exception`` of a player's code catches it).

    Attributes:
        signum: the signal; the exit code is 128 + signum (130, 143).
    """

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def stop_on_signal(signum: int, frame) -> NoReturn:
    """The handler of SIGINT and SIGTERM: stops the tournament where it is (the workers
    are killed on the way out)."""
    raise Stopped(signum)


def stopped(stop: Stopped) -> int:
    """Says the tournament stopped and how to resume; returns its exit code."""
    print(f"{PROG}: stopped; rerun the same command to resume", file=sys.stderr)
    return 128 + stop.signum


def fail(message: str) -> NoReturn:
    """One line on stderr, exit code 2 (rl/command_line.py)."""
    command_line.fail(PROG, message)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line's run folders and flags; bad ones end the process (exit 2)."""
    parser = command_line.OneLineParser(
        prog=PROG,
        description="Plays every pair of players (policy artefacts of runs, scripted players) "
        "and writes payoff.csv, payoff.png, ratings.json (Elo, bootstrap intervals, Nash "
        "mixture) and tb/. Rerun the same command to resume.",
    )
    parser.add_argument("run_dirs", nargs="*", metavar="RUN_DIR", help="run folders")
    parser.add_argument(
        "--players", nargs="+", default=[], metavar="NAME", help="registered scripted players"
    )
    parser.add_argument("--game", required=True, help="tictactoe, connect_four or rps")
    parser.add_argument(
        "--games", type=int_in_range(1, MAX_GAMES), required=True, help="games per pair of players"
    )
    parser.add_argument("--output_dir", required=True, help="the tournament folder")
    selection = parser.add_mutually_exclusive_group()
    selection.add_argument(
        "--every",
        type=int_in_range(1, MAX_GAMES),  # artefacts are fewer than games
        default=None,
        metavar="K",
        help="each run's every K-th artefact from its oldest (default: all)",
    )
    selection.add_argument("--latest", action="store_true", help="only each run's newest artefact")
    parser.add_argument(
        "--num_workers",
        type=int_in_range(1, MAX_WORKERS),
        default=1,
        help="processes (or Ray tasks at once) playing games; 1: this process (default)",
    )
    parser.add_argument(
        "--worker_timeout",
        type=float_in_range(1.0, MAX_WORKER_TIMEOUT),
        default=WORKER_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help="a worker process or Ray task that returns no games for this long while it owes "
        "some (hung, or stopped by SIGSTOP) is killed and the tournament stops (exit 1; rerun "
        f"to resume) (default {WORKER_TIMEOUT_SECONDS:g})",
    )
    parser.add_argument("--sys", choices=SYSTEMS, default="local", help="local (default) or ray")
    parser.add_argument(
        "--seed", type=int_in_range(0, MAX_SEED), default=0, help="seeds every game (default 0)"
    )
    return parser.parse_args(list(argv))


@dataclasses.dataclass(frozen=True)
class Plan:
    """A checked tournament, ready to play.

    Attributes:
        folder: the tournament folder.
        spec: the game.
        entrants: the players.
        config: tournament.json's contents.
    """

    folder: str
    spec: GameSpec
    entrants: List[Entrant]
    config: Dict[str, object]

    @property
    def names(self) -> List[str]:
        return [e.name for e in self.entrants]

    @property
    def games_per_pair(self) -> int:
        return int(self.config["games_per_pair"])

    @property
    def seed(self) -> int:
        return int(self.config["seed"])


def prepare(args: argparse.Namespace) -> Plan:
    """Checks the command line against the disk without writing anything.

    Raises:
        TournamentError, UnknownNameError, ImportError: one readable line each.
    """
    spec = check_game_name(args.game)
    make_game(spec.name).close()  # PettingZoo is installed (the games extra)
    entrants = []
    for run_dir in args.run_dirs:
        entrants.extend(schedule.run_entrants(run_dir, spec, args.every, args.latest))
    for name in args.players:
        if os.path.isdir(name) and name not in registry.players:
            raise TournamentError(
                f"--players {name}: that is a folder, not a scripted player; give run "
                "folders before --players (it takes every name after it)"
            )
        entrants.append(schedule.scripted_entrant(name, spec))
    schedule.check_entrants(entrants)
    config = schedule.config_record(spec.name, args.games, args.seed, entrants)
    folder = args.output_dir
    try:
        check_output_dir(folder)
    except RunConflictError as error:  # a file, under a file, or not writable
        raise TournamentError(str(error)) from None
    old = records.read_config(folder) if os.path.isdir(folder) else None
    if old is None and os.path.isdir(folder) and set(os.listdir(folder)) - {LOCK_FILE}:
        raise TournamentError(
            f"--output_dir {folder} is not empty and holds no {records.CONFIG_FILE}: give an "
            "empty or new folder"
        )
    if old is not None:
        conflict = schedule.config_conflict(old, config)
        if conflict:
            raise TournamentError(f"--output_dir {folder}: {conflict}; use another --output_dir")
    records.read_games(os.path.join(folder, records.GAMES_FILE))  # refuses a damaged file
    return Plan(folder, spec, entrants, config)


def chunks(plan: Plan, missing: Sequence[GameKey], workers: int) -> List[play.Chunk]:
    """The missing games in chunks of one pair, small enough to keep ``workers`` busy."""
    size = max(1, min(MAX_CHUNK, math.ceil(len(missing) / (4 * workers))))
    by_name = {e.name: e for e in plan.entrants}
    by_pair: Dict[tuple, List[int]] = {}
    for key in missing:
        by_pair.setdefault((key.a, key.b), []).append(key.index)
    out = []
    for (a, b), indices in by_pair.items():
        for start in range(0, len(indices), size):
            part = tuple(indices[start : start + size])
            out.append(play.Chunk(plan.spec.name, by_name[a], by_name[b], part, plan.seed))
    return out


def play_here(work: Sequence[play.Chunk]) -> Iterator[List[dict]]:
    """Plays the chunks in this process; yields each chunk's records."""
    cache = play.PlayerCache()
    for chunk in work:
        yield play.play_chunk(chunk, cache)


def play_in_processes(
    work: Sequence[play.Chunk], workers: int, timeout: float
) -> Iterator[List[dict]]:
    """Plays the chunks in ``workers`` processes; yields each chunk's records as it ends.

    One pipe per worker, watched beside the worker's sentinel, so a worker that dies
    raises ``WorkerDied`` at once, and one that owes a chunk's records for ``timeout``
    seconds (hung, or stopped) raises ``WorkerHung``; on the way out (a signal, a
    failure, the end) the workers are killed and reaped, and a worker whose parent died
    ends at its pipe's end of file. multiprocessing.Pool waits for ever for a dead
    worker's task, and Python 3.11's ProcessPoolExecutor can deadlock when its workers
    die (CPython gh-105829, gh-125451).
    """
    # 'spawn': workers may load TensorFlow (policy artefacts), which does not survive fork.
    context = multiprocessing.get_context("spawn")
    todo = list(reversed(work))
    started = []  # (process, the parent's end of its pipe)
    try:
        for _ in range(min(workers, len(todo))):
            ours, theirs = context.Pipe()
            process = context.Process(target=play.serve_chunks, args=(theirs,), daemon=True)
            process.start()
            theirs.close()
            started.append((process, ours))
        busy = {}
        due = {}  # the parent's end of a busy worker's pipe -> when its chunk is overdue
        for process, conn in started:
            conn.send(todo.pop())
            busy[conn] = process
            due[conn] = time.monotonic() + timeout
        while busy:
            pipe_of = {process.sentinel: conn for conn, process in busy.items()}
            wait_seconds = max(0.0, min(due.values()) - time.monotonic())
            for ready in connection.wait([*busy, *pipe_of], timeout=wait_seconds):
                if ready in pipe_of:  # a worker ended
                    conn = pipe_of[ready]
                    # Not a loss if its last result is still to read, or if it had no work
                    # left (told it was done earlier in this round).
                    if conn in busy and not conn.poll():
                        raise worker_died(busy[conn])
                    continue
                if ready not in busy:
                    continue
                try:
                    result = ready.recv()
                except (EOFError, OSError):  # it died; its pipe ended before its sentinel
                    raise worker_died(busy[ready]) from None
                if isinstance(result, BaseException):
                    raise result
                chunk = todo.pop() if todo else None  # None: this worker is done
                try:
                    ready.send(chunk)
                except OSError:  # it died after its last result
                    raise worker_died(busy[ready]) from None
                if chunk is None:
                    del busy[ready], due[ready]
                else:
                    due[ready] = time.monotonic() + timeout
                yield result
            # Looked at after every wait, so the others' results cannot hide a hung one.
            now = time.monotonic()
            late = [conn for conn, when in due.items() if when <= now and not conn.poll()]
            if late:
                raise worker_hung(busy[late[0]], timeout)
    finally:
        for process, conn in started:
            if process.is_alive():
                process.kill()  # a stopped (SIGSTOP) process dies of SIGKILL too
            process.join()
            conn.close()


def worker_died(process: multiprocessing.Process) -> play.WorkerDied:
    """The error for a worker process that ended while it had work."""
    process.join()
    return play.WorkerDied(
        f"worker process {process.pid} died (exit code {process.exitcode}); rerun the "
        "same command to resume"
    )


def worker_hung(process: multiprocessing.Process, timeout: float) -> play.WorkerHung:
    """The error for a worker process that owed a chunk's records for ``timeout`` seconds
    (it is killed on the way out of ``play_in_processes``)."""
    return play.WorkerHung(
        f"worker process {process.pid} returned no games for {timeout:g} s "
        "(--worker_timeout; hung, or stopped) and was killed; rerun the same command to resume"
    )


def play_on_ray(work: Sequence[play.Chunk], timeout: float) -> Iterator[List[dict]]:
    """Plays the chunks as Ray tasks (Ray connected); yields each chunk's records as it ends.

    Ray tells not when a queued task starts, so the bound is on progress: no task ending
    for ``timeout`` seconds means one running all that time (a task starts only as
    another ends), and raises ``WorkerHung``.
    """
    import ray

    task = ray.remote(num_cpus=1, max_retries=0)(play.play_chunk_here)
    pending = [task.remote(chunk) for chunk in work]
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1, timeout=timeout)
            if not done:
                raise play.WorkerHung(
                    f"no Ray task returned games for {timeout:g} s (--worker_timeout; hung, "
                    "or its node stopped); the tasks were cancelled; rerun the same command "
                    "to resume"
                )
            yield ray.get(done[0])
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)


@contextlib.contextmanager
def locked(folder: str):
    """Holds the folder's lock: two tournaments never append to one games.jsonl."""
    fd = files.lock_exclusively(os.path.join(folder, LOCK_FILE))
    if fd is None:
        raise TournamentError(f"another tournament is running in {folder}")
    try:
        yield
    finally:
        os.close(fd)


def run(plan: Plan, workers: int, system: str, timeout: float) -> int:
    """Plays the missing games, then writes the outputs; returns the exit code.

    Args:
        plan: the checked tournament.
        workers: processes (or Ray tasks at once) playing games; 1: this process.
        system: "local" or "ray".
        timeout: seconds a worker may owe a chunk's records (--worker_timeout).
    """
    os.makedirs(plan.folder, exist_ok=True)
    with locked(plan.folder):
        records.write_config(plan.folder, plan.config)
        path = os.path.join(plan.folder, records.GAMES_FILE)
        games_file = records.GamesFile(path)
        done = {records.record_key(r) for r in records.read_games(path)}
        planned = schedule.all_games(plan.names, plan.games_per_pair)
        missing = [key for key in planned if key not in done]
        print(
            f"{PROG}: {len(plan.names)} players, {len(planned)} games, "
            f"{len(planned) - len(missing)} already played",
            file=sys.stderr,
            flush=True,
        )
        work = chunks(plan, missing, workers)
        if system == "ray":
            results = play_on_ray(work, timeout)
        elif workers > 1:
            results = play_in_processes(work, workers, timeout)
        else:
            results = play_here(work)
        try:
            for finished in results:
                games_file.append(finished)
        except Stopped as stop:
            return stopped(stop)
        except Exception as error:  # a player or game failed, in whichever process
            print(f"{PROG}: a game failed: {error_line(error, typed=True)}", file=sys.stderr)
            return EXIT_GAME_FAILED
        planned_keys = set(planned)
        played = [r for r in records.read_games(path) if records.record_key(r) in planned_keys]
        wins, draws = records.score_tables(played, plan.names)
        table = report.standings(plan.names, wins, draws, plan.seed)
        report.write_outputs(plan.folder, table, plan.spec.name, plan.games_per_pair, plan.seed)
    print(report.summary(table), flush=True)
    print(
        f"{PROG}: {len(played)} games ({len(missing)} played now); outputs in {plan.folder}",
        file=sys.stderr,
    )
    return 0


def connect_ray(workers: int) -> Optional[str]:
    """Attaches to RAY_ADDRESS's cluster, or starts a local Ray with ``workers`` CPUs."""
    return connect(os.environ.get("RAY_ADDRESS"), workers)


def main(argv: Sequence[str]) -> int:
    """Runs the tournament the command line describes.

    Args:
        argv: the arguments after the program name.

    Returns:
        0 done, 1 a game failed (or its worker died or hung), 128 + signal when stopped
        by SIGINT or SIGTERM (bad input exits with 2).
    """
    args = parse_args(argv)
    # Set even when started with SIGINT ignored, as a script's background job is.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stop_on_signal)
    try:
        plan = prepare(args)
        if args.sys == "ray":
            connect_ray(args.num_workers)
    except (TournamentError, UnknownNameError, ImportError, SystemUnavailableError) as error:
        fail(str(error))
    except Stopped as stop:
        return stopped(stop)
    try:
        return run(plan, args.num_workers, args.sys, args.worker_timeout)
    except TournamentError as error:  # the lock is held by another tournament
        fail(str(error))
    except Stopped as stop:
        return stopped(stop)
    finally:
        if args.sys == "ray":
            disconnect()
