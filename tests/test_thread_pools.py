"""`python -m experiments` chooses TensorFlow's CPU thread pools before TensorFlow starts,
unless the user chose them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from experiments import thread_pools


@pytest.mark.parametrize(
    ("cores", "inter", "intra"), [(1, "1", "1"), (2, "2", "1"), (3, "2", "1"), (8, "2", "4")]
)
def test_two_inter_op_threads_of_half_the_cores_each(cores, inter, intra):
    assert thread_pools.defaults(cores) == {
        "TF_NUM_INTEROP_THREADS": inter,
        "TF_NUM_INTRAOP_THREADS": intra,
    }


@pytest.mark.parametrize("given", ["TF_NUM_INTEROP_THREADS", "TF_NUM_INTRAOP_THREADS"])
def test_a_users_own_pool_size_is_left_as_it_is(given):
    environ = {given: "7"}
    thread_pools.choose(environ)
    assert environ == {given: "7"}


def test_the_runners_processes_start_tensorflow_with_the_chosen_pools():
    """The entry point sets them before any command imports TensorFlow (which reads them
    once, when it makes its pools)."""
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in (thread_pools.INTER_OP, thread_pools.INTRA_OP)
    }
    code = (
        "import os, runpy, sys; sys.argv = ['experiments', '--help']\n"
        "try:\n    runpy.run_module('experiments', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print(os.environ['TF_NUM_INTEROP_THREADS'], os.environ['TF_NUM_INTRAOP_THREADS'], "
        "'tensorflow' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=environ, capture_output=True, text=True, check=True
    ).stdout.split()
    expected = thread_pools.defaults(thread_pools.usable_cores())
    assert out[-3:] == [
        expected["TF_NUM_INTEROP_THREADS"],
        expected["TF_NUM_INTRAOP_THREADS"],
        "False",  # chosen before TensorFlow was imported
    ]


def test_the_tag_says_each_pools_size_or_that_tensorflow_chose_it():
    assert thread_pools.describe({}) == "default inter-op x default intra-op"
    environ = {}
    thread_pools.choose(environ)
    assert thread_pools.describe(environ) == (
        f"{environ['TF_NUM_INTEROP_THREADS']} inter-op x {environ['TF_NUM_INTRAOP_THREADS']} intra-op"
    )
    assert thread_pools.describe({"TF_NUM_INTRAOP_THREADS": "3"}) == "default inter-op x 3 intra-op"
