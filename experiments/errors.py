"""Every exception of the runner and the exit code `main` turns each into.

`EXITS` is the one table from exception type to exit code (and the prefix of
the message printed on stderr); `commands.main` looks errors up there and
nowhere else. Anything not in the table is a bug and propagates with its
traceback.
"""

from __future__ import annotations

import reprlib
from typing import NamedTuple

# The most characters of a received value an error message shows.
MAX_SHOWN = 200


def _shortened_repr() -> reprlib.Repr:
    short = reprlib.Repr()
    short.maxlevel = 3
    short.maxdict = short.maxlist = short.maxtuple = short.maxset = short.maxfrozenset = 8
    short.maxstring = short.maxother = short.maxlong = MAX_SHOWN
    return short


_SHORT = _shortened_repr()


def shown(value: object) -> str:
    """`repr(value)` as an error message shows it: at most `MAX_SHOWN` characters, made in
    time and memory bounded however long or deeply nested `value` is (a YAML alias bomb's
    expansion, a megabyte string), with `...` where it was cut."""
    try:
        text = _SHORT.repr(value)
    except ValueError:  # an int past Python's digit limit for str()
        text = f"<{type(value).__name__} too large to show>"
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."


class ConfigError(Exception):
    """A config, an override, a command-line value or a task's data is invalid (exit 2)."""


def problem(key: str, got: object, expected: str) -> str:
    """One line of a config error, the format every check uses: `  key: got V; expected E`."""
    return f"  {key}: got {shown(got)}; expected {expected}"


def invalid_config(key: str, got: object, expected: str) -> ConfigError:
    """A `ConfigError` for one bad value, worded as the schema's own errors are."""
    return ConfigError(f"invalid config:\n{problem(key, got, expected)}")


class TrackingUnavailable(Exception):
    """The tracking server cannot be reached before a run starts (exit 3)."""


class RunFailed(Exception):
    """The run stopped on purpose, e.g. on a non-finite loss (exit 1)."""


class NonFiniteLoss(RunFailed):
    """The training loss became NaN or infinite."""


class StorageError(RunFailed):
    """A local file the run keeps (spool, checkpoint) cannot be written whole, e.g. a full disk."""

    def __init__(self, message: str, path=None):
        super().__init__(message)
        self.path = path


class JournalWriteError(StorageError):
    """A record could not be appended whole to a journal (the file is left as it was)."""


class CorruptData(Exception):
    """A checkpoint or spool on disk is damaged, belongs to another run, or is not ours (exit 1)."""


class RunLocked(Exception):
    """Another live process owns the run (writes its checkpoints and spool) (exit 4)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: handled exactly like Ctrl+C (a run ends KILLED, resumable) (exit 143)."""


class Offline(Exception):
    """Internal to tracking: the server did not answer after retries (the call is spooled)."""


class ServerFailed(Exception):
    """A server the CLI started (`serve`) exited or did not answer in time."""


class Exit(NamedTuple):
    """How `main` reports one kind of error: exit code and message prefix."""

    code: int
    prefix: str


EXIT_CONFIG = 2
EXIT_TRACKING_UNAVAILABLE = 3
EXIT_RUN_FAILED = 1
EXIT_LOCKED = 4
EXIT_TERMINATED = 128 + 15  # what a shell reports for a process ended by SIGTERM

EXITS: dict[type[Exception], Exit] = {
    ConfigError: Exit(EXIT_CONFIG, "error"),
    TrackingUnavailable: Exit(EXIT_TRACKING_UNAVAILABLE, "error"),
    RunFailed: Exit(EXIT_RUN_FAILED, "error: run failed"),
    CorruptData: Exit(EXIT_RUN_FAILED, "error"),
    RunLocked: Exit(EXIT_LOCKED, "error"),
    ServerFailed: Exit(EXIT_RUN_FAILED, "error"),
}


def exit_for(err: BaseException) -> Exit | None:
    """The table entry for `err` (subclasses included), or None when it is not a runner error."""
    for kind, exit_ in EXITS.items():
        if isinstance(err, kind):
            return exit_
    return None
