"""One way for a test to wait for a state: poll a condition, never sleep a fixed time."""

import time


def wait_for(condition, what: str, timeout: float = 120.0, process=None, interval: float = 0.02):
    """Polls ``condition`` until it returns something truthy, and returns that.

    Fails, naming ``what``, when ``timeout`` seconds pass first or when ``process`` (a
    ``subprocess.Popen``) ends first: a run that died should fail at once, not at the timeout.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the process ended (exit {process.returncode}) before {what}")
        if time.monotonic() >= deadline:
            raise AssertionError(f"no {what} after {timeout:g} s")
        time.sleep(interval)
