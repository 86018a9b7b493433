"""Keeps TensorFlow's C++ log lines (oneDNN, CUDA, cuInit, CPU features) off the terminal.

TensorFlow 2.19+ logs through absl before absl is initialised, which ignores
`TF_CPP_MIN_LOG_LEVEL`: lines such as `I0000 00:00:... port.cc:153] oneDNN
custom operations are on` reach stderr whatever the setting. While a command
runs, `filtered_stderr()` passes file descriptor 2 through a thread that
drops those lines (info, warning and error; fatal ones pass) and forwards
everything else, Python tracebacks included, unchanged. A user who set
`TF_CPP_MIN_LOG_LEVEL` chose the level: then nothing is filtered.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading

# absl's prefix (`I0000 00:00:1796246047.610130   18575 port.cc:153] `), its pre-init
# warning, and the second line of TensorFlow's CPU-feature message.
_NATIVE = re.compile(
    rb"^([IWE]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\] "
    rb"|WARNING: All log messages before absl::InitializeLog\(\) is called"
    rb"|To enable the following instructions: .* rebuild TensorFlow)"
)


def is_native_log(line: bytes) -> bool:
    return bool(_NATIVE.match(line))


@contextlib.contextmanager
def filtered_stderr():
    """Within the block, TensorFlow's C++ log lines on fd 2 are dropped (see the module doc)."""
    if "TF_CPP_MIN_LOG_LEVEL" in os.environ:
        yield
        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"  # what absl honours once initialised
    sys.stderr.flush()
    original = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)
    thread = threading.Thread(target=_forward, args=(read_end, original), daemon=True)
    thread.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(original, 2)  # closes the pipe's last write end: the thread sees EOF
        thread.join(timeout=5)
        os.close(original)
        del os.environ["TF_CPP_MIN_LOG_LEVEL"]


def _forward(read_end: int, target: int) -> None:
    with os.fdopen(read_end, "rb", buffering=0) as pipe:
        pending = b""
        while chunk := pipe.read(65536):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            _write(target, [line + b"\n" for line in lines if not is_native_log(line)])
        if pending and not is_native_log(pending):
            _write(target, [pending])


def _write(target: int, lines: list[bytes]) -> None:
    data = b"".join(lines)
    while data:
        data = data[os.write(target, data) :]
