"""Errors that mean bad input (reported as one line, exit 2), in the lowest layer.

Kept apart from the modules that raise them so any layer may raise or catch them, and
train.py can name them without loading TensorFlow.
"""


def one_line(text: str) -> str:
    """``text`` with its control characters (newline, tab, escape...) written as Python
    escapes (``\\n``): an error that quotes user input stays one line on the terminal.

    Every command's one error line passes through it, so no message need escape the
    values it quotes.
    """
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def first_line(text: str) -> str:
    """The first line of ``text`` that is not blank, trimmed; "" when ``text`` is blank."""
    lines = text.strip().splitlines()
    return lines[0].strip() if lines else ""


def error_line(error: BaseException, typed: bool = False) -> str:
    """An exception in one line: its message's first line, or its type's name when the
    message is blank. Every "what it raised" of rl's messages is made here.

    Args:
        error: the exception.
        typed: put its type's name first ("ValueError: bad"), as for an error rl did not
            raise itself (an env's, a plugin's).
    """
    line = first_line(str(error))
    if not line:
        return type(error).__name__
    return f"{type(error).__name__}: {line}" if typed else line


class UnknownNameError(KeyError):
    """A name that is not registered (rl/registry.py). ``str()`` gives one readable line."""

    def __str__(self) -> str:
        return str(self.args[0])


class HParamsError(ValueError):
    """A bad override or hparams file; ``str()`` is one readable line. Here, below
    rl/hparams, because rl/envs raises it too for a bad env name."""


class RunConflictError(ValueError):
    """output_dir cannot hold this run (another run's hparams, a damaged run
    file, not a writable folder); one readable line."""


class CheckpointError(RuntimeError):
    """No checkpoint in output_dir can be read."""


class SystemUnavailableError(RuntimeError):
    """A --sys target cannot run here (no devices, an unreachable cluster); one line."""


class EnvServerError(RuntimeError):
    """An env server (rl/envs/remote) cannot be used: unreachable, refused the token,
    lost the session, or its env raised; one line."""


class EnvError(RuntimeError):
    """An env raised while it was reset or stepped (a simulator that crashed): a failure
    of the env, not bad input, so not among ``USER_ERRORS``; one line naming the env and
    what it raised, which is the ``__cause__``."""


class PluginError(ImportError):
    """A --plugins module that cannot be imported or fails while registering; one line."""


# What train.py and the other commands (rl.envs.check, scripts) report as one line and
# exit code 2: bad input, as opposed to a failure of rl or of an env.
USER_ERRORS = (
    UnknownNameError,
    HParamsError,
    RunConflictError,
    CheckpointError,
    SystemUnavailableError,
    EnvServerError,  # at start-up: a wrong address or token
)
