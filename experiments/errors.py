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


class RefusedData(CorruptData):
    """Files a command was pointed at, by the user or by the run's tags, are refused as its
    input: a checkpoint folder that is another run's, a link, a relative path, an
    unreadable `run.json`, no checkpoint to resume from, a damaged one (exit 2). The same
    damage found while a run trains is a `CorruptData` (exit 1)."""


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

EXIT_INTERRUPTED = 128 + 2  # Ctrl+C (SIGINT)

# What each exit code means, as `--help` and docs/guides/runner.md list them.
EXIT_CODES = {
    0: "done",
    EXIT_RUN_FAILED: "failure: the run or the command failed (its message says why)",
    EXIT_CONFIG: "refused input: a config, an argument, a run id, or files the command was "
    "pointed at (not the run's, damaged); nothing was trained or uploaded",
    EXIT_TRACKING_UNAVAILABLE: "the tracking server cannot be reached",
    EXIT_LOCKED: "another live process holds the run",
    EXIT_INTERRUPTED: "interrupted by Ctrl+C (a run ends KILLED, resumable)",
    EXIT_TERMINATED: "stopped by SIGTERM (a run ends KILLED, resumable)",
}

EXITS: dict[type[Exception], Exit] = {
    ConfigError: Exit(EXIT_CONFIG, "error"),
    RefusedData: Exit(EXIT_CONFIG, "error"),
    TrackingUnavailable: Exit(EXIT_TRACKING_UNAVAILABLE, "error"),
    RunFailed: Exit(EXIT_RUN_FAILED, "error: run failed"),
    CorruptData: Exit(EXIT_RUN_FAILED, "error"),
    RunLocked: Exit(EXIT_LOCKED, "error"),
    ServerFailed: Exit(EXIT_RUN_FAILED, "error"),
}


def exit_for(err: BaseException) -> Exit | None:
    """The table entry for `err`: its class's, or that of its nearest base class in the table
    (`RefusedData` before `CorruptData`); None when it is not a runner error."""
    for kind in type(err).__mro__:
        if kind in EXITS:
            return EXITS[kind]
    return None
