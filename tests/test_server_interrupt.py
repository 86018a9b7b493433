"""Ctrl+C stops `ui`'s and `serve`'s server whichever thread the kernel hands the signal to."""

from __future__ import annotations

import subprocess
import sys

import psutil
from scaleout_helpers import child_env

# The command's wait (`ui.run_in_group`) with a server that would run for a minute, and a
# Ctrl+C delivered to another thread of the process than the main one (as the kernel may):
# Python runs the handler in the main thread only, when that thread next runs Python.
SCRIPT = """
import signal, threading, time
from experiments.commands.ui import run_in_group

signal.signal(signal.SIGINT, signal.default_int_handler)  # as from a terminal

def started(child):
    print(child.pid, flush=True)
    def ctrl_c_to_this_thread():
        time.sleep(0.5)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
    threading.Thread(target=ctrl_c_to_this_thread, daemon=True).start()

began = time.monotonic()
code = run_in_group(["sleep", "60"], started=started)
print(code, round(time.monotonic() - began, 1), flush=True)
"""


def test_a_ctrl_c_another_thread_receives_stops_the_server_at_once():
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=30,
        env=child_env(),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    server, line = done.stdout.split("\n")[:2]
    code, seconds = line.split()
    assert code == "0"
    assert float(seconds) < 10, seconds  # not the server's minute
    assert not psutil.pid_exists(int(server)) or (
        psutil.Process(int(server)).status() == psutil.STATUS_ZOMBIE
    )
