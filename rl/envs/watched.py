"""Gymnasium's AsyncVectorEnv with its copies' processes watched (``vectorization=async``).

Gymnasium waits for a copy's answer without a bound (or, given a timeout, drops the
answers that came), and on close sends SIGTERM, which a stopped process ignores, then
waits for it for ever. Here a copy that is not made, or does not answer a reset, step or
call, within $RL_ENV_ANSWER_SECONDS (hung, or stopped by SIGSTOP) ends the wait with one
``EnvError`` naming it; once a signal asks the run to stop (``STOP_ASKED``) an answer is
awaited for a second at most; and close kills, with SIGKILL, the copies that hung or do
not close within seconds.
"""

import time
from typing import List

import gymnasium as gym
from gymnasium.vector.async_vector_env import AsyncState

from rl.errors import EnvError, HParamsError
from rl.processes import STOP_ASKED, answer_seconds_variable

ANSWER_VARIABLE = "RL_ENV_ANSWER_SECONDS"
# Longer than any reset or step of a simulator that works (loading a level included).
DEFAULT_ANSWER_SECONDS = 120.0
POLL_SECONDS = 0.2  # how late a stop signal may be noticed while waiting
STOPPING_SECONDS = 1.0  # once a stop is asked, an answer later than this is not awaited
CLOSE_SECONDS = 5.0  # copies not closed by then are killed


def answer_seconds() -> float:
    """How long a copy may take to answer before it is taken as hung."""
    return answer_seconds_variable(ANSWER_VARIABLE, DEFAULT_ANSWER_SECONDS, HParamsError)


class WatchedAsyncVectorEnv(gym.vector.AsyncVectorEnv):
    """An AsyncVectorEnv whose waits for its copies are bounded and whose close is too."""

    def __init__(self, env_fns, name: str, **kwargs):
        """Args:
        env_fns: one constructor per copy, as for AsyncVectorEnv.
        name: the env's name, for the line about a hung copy.
        **kwargs: more AsyncVectorEnv arguments (autoreset_mode, ...).
        """
        self.answer_seconds = answer_seconds()  # read before any copy starts: bad input
        self.name = name
        self.hung: List[int] = []  # the copies found not answering
        self._starting = False  # while the copies' first answer is awaited (__init__)
        super().__init__(env_fns, **kwargs)

    def _check_spaces(self) -> None:
        # Gymnasium's check at the end of __init__ reads every copy's answer without a
        # bound: a copy whose env hangs as it is made is found by a watched call first,
        # and the copies are killed (the caller gets no env to close).
        self._starting = True
        try:
            self.call_async("render_mode")  # any attribute: the answer is what counts
            self.call_wait()
        except EnvError:
            self.close(terminate=True)
            raise
        finally:
            self._starting = False
        super()._check_spaces()

    def _poll_pipe_envs(self, timeout=None) -> bool:
        # Gymnasium's own waits call this with no timeout, meaning "do not wait": here
        # they wait, in short polls, until every copy answered or the deadline passed.
        if timeout is not None:
            return super()._poll_pipe_envs(timeout)
        self._assert_is_running()
        deadline = time.monotonic() + self.answer_seconds
        pending = list(range(self.num_envs))
        while True:
            pending = [i for i in pending if not self._answered(i)]
            if not pending:
                return True
            now = time.monotonic()
            if STOP_ASKED.is_set():
                deadline = min(deadline, now + STOPPING_SECONDS)
            if now >= deadline:
                self.hung = pending
                raise EnvError(self._not_answering(pending))
            self.parent_pipes[pending[0]].poll(min(POLL_SECONDS, deadline - now))

    def _answered(self, index: int) -> bool:
        pipe = self.parent_pipes[index]
        # A pipe closed after its copy raised is Gymnasium's to report.
        return pipe is None or pipe.closed or pipe.poll(0)

    def _not_answering(self, pending: List[int]) -> str:
        copy = pending[0]
        event = "was not made" if self._starting else f"did not answer {self._state.value}()"
        what = (
            "as the run stopped"
            if STOP_ASKED.is_set()
            else f"within {self.answer_seconds:g} s (${ANSWER_VARIABLE}): it hangs or was stopped"
        )
        others = f" (and {len(pending) - 1} more)" if len(pending) > 1 else ""
        return (
            f"env '{self.name}' copy {copy} of {self.num_envs} (process "
            f"{self.processes[copy].pid}){others} {event} {what}"
        )

    def close_extras(self, timeout=None, terminate: bool = False) -> None:
        """Asks the copies to close (unless one hung or a call is unanswered), waits up to
        CLOSE_SECONDS, and kills the ones still running."""
        del timeout  # the wait is bounded here
        pipes = [p for p in self.parent_pipes if p is not None and not p.closed]
        deadline = time.monotonic()
        if not (terminate or self.hung) and self._state == AsyncState.DEFAULT:
            deadline += CLOSE_SECONDS
            for pipe in pipes:
                try:
                    pipe.send(("close", None))
                except OSError:  # the copy is gone already
                    pass
        for process in self.processes:
            process.join(max(deadline - time.monotonic(), 0))
            if process.is_alive():
                process.kill()  # SIGKILL: a stopped process takes no other signal
        for pipe in pipes:
            pipe.close()
        for process in self.processes:
            process.join()
