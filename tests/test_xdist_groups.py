"""`make test-slow` runs with `--dist loadgroup`: the tests of one `xdist_group` (the serving
and copy-run modules, whose module fixtures train models) run on one worker, which builds the
fixtures once. With pytest 9.2 and pytest-xdist 3.8 the mark was silently ignored
(pytest-xdist#1386): each worker built those fixtures again (the serving one: 43 s twice)."""

import subprocess
import sys
import textwrap

GROUPED = """
import os
import pytest

pytestmark = pytest.mark.xdist_group("fixtures")

@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    with open({ran!r}, "a") as handle:
        handle.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
"""


def test_a_group_runs_on_one_worker(tmp_path):
    ran = tmp_path / "ran.txt"
    (tmp_path / "test_grouped.py").write_text(textwrap.dedent(GROUPED.format(ran=str(ran))))
    free = "import pytest\n\n@pytest.mark.parametrize('i', range(6))\ndef test_free(i):\n    pass\n"
    (tmp_path / "test_free.py").write_text(free)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist"]
        + ["loadgroup", "--rootdir", str(tmp_path), "-c", "/dev/null", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and "12 passed" in done.stdout, done.stdout[-3000:]
    workers = ran.read_text().split()
    # without the group, xdist's load scheduling hands the six out to both workers
    assert len(workers) == 6 and len(set(workers)) == 1, workers
