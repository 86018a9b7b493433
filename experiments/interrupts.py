"""SIGTERM handled like Ctrl+C, and the moments it must wait for.

`sigterm_as_interrupt()` (around every command, see `commands.main`): the
first SIGTERM raises `errors.Terminated`, a `KeyboardInterrupt`, in the main
thread, so a run stops exactly as on Ctrl+C (KILLED, checkpoint kept); later
ones are ignored while the command winds down. `deferred()` holds a SIGTERM
back until the block is done: ending a run (spool upload, final status) is
not cut in the middle.

A signal handler's exception is lost when the signal lands in code whose
exceptions Python only reports ("Exception ignored in ..."): a `__del__`, a
weakref or garbage-collector callback (JAX registers one). Such a lost
`Terminated` is sent again, from outside that code, so one SIGTERM always stops
the command.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

from experiments.errors import Terminated

_state = {"received": False, "deferring": 0, "pending": False, "installed": False}


def _handler(signum, frame):
    if _state["received"]:
        return
    if _state["deferring"]:
        _state["pending"] = True
        return
    _state["received"] = True
    raise Terminated("SIGTERM")


@contextlib.contextmanager
def sigterm_as_interrupt():
    """While inside (main thread only), the first SIGTERM raises `Terminated`."""
    if threading.current_thread() is not threading.main_thread() or _state["installed"]:
        yield
        return
    _state.update(received=False, deferring=0, pending=False, installed=True)
    previous = signal.signal(signal.SIGTERM, _handler)
    previous_hook = sys.unraisablehook

    def redeliver_a_lost_terminated(unraisable):
        if isinstance(unraisable.exc_value, Terminated):
            _state["received"] = False
            # From a thread, a moment later: the main thread has left the code that lost it.
            again = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGTERM))
            again.daemon = True  # never what keeps a finishing process alive
            again.start()
            return
        previous_hook(unraisable)

    sys.unraisablehook = redeliver_a_lost_terminated
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        sys.unraisablehook = previous_hook
        _state["installed"] = False


@contextlib.contextmanager
def deferred():
    """A SIGTERM arriving inside is raised (as `Terminated`) only once the block is done."""
    _state["deferring"] += 1
    try:
        yield
    finally:
        _state["deferring"] -= 1
        if not _state["deferring"] and _state["pending"] and not _state["received"]:
            _state["pending"] = False
            _state["received"] = True
            raise Terminated("SIGTERM")
