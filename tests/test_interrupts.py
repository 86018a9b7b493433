"""One SIGTERM stops a command, even when it lands where Python only reports exceptions."""

from __future__ import annotations

import gc
import os
import signal
import time

import pytest

from experiments import interrupts
from experiments.errors import Terminated


class _RaisesInDel:
    """Stands for a garbage-collector callback (JAX's) the signal handler happened to run in."""

    def __del__(self):
        interrupts._handler(signal.SIGTERM, None)  # its Terminated is "ignored" by Python


def test_a_terminated_lost_in_a_finaliser_is_delivered_again():
    with interrupts.sigterm_as_interrupt(), pytest.raises(Terminated):  # noqa: PT012
        obj = _RaisesInDel()
        del obj
        gc.collect()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            time.sleep(0.01)
        pytest.fail("the lost SIGTERM was never delivered again")


def test_a_second_sigterm_while_winding_down_is_ignored():
    with interrupts.sigterm_as_interrupt():
        with pytest.raises(Terminated):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)  # nothing raised: the command is already stopping


def test_a_deferred_sigterm_is_raised_when_the_block_ends():
    with interrupts.sigterm_as_interrupt(), pytest.raises(Terminated), interrupts.deferred():  # noqa: PT012
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)  # not raised inside
        finished = True
    assert finished
