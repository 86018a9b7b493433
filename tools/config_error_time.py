"""How long a config error takes to reach the terminal: the wall time of whole processes,
`python -m experiments run demo --set train.epoch=2` (a mistyped key), against the full
validation alone (the process that imports Keras and validates the same config), the
median of `--repeat` runs each.

    python -m tools.config_error_time --repeat 5      # from the project root

Prints one line per case; docs/guides/runner.md holds the figures measured.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

CASES = {
    "cli: run demo --set train.epoch=2": [
        "-m", "experiments", "run", "demo", "--set", "train.epoch=2",
    ],
    "cli: run demoo (a mistyped config name)": ["-m", "experiments", "run", "demoo"],
    "full validation only (imports Keras)": [
        "-c",
        "from experiments import config\n"
        "try:\n"
        "    config.load_config('experiments/configs/demo.yaml', ['train.epoch=2'])\n"
        "except config.ConfigError:\n"
        "    pass\n",
    ],
}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    for label, argv in CASES.items():
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            subprocess.run([sys.executable, *argv], capture_output=True, env=env, check=False)
            times.append(time.perf_counter() - start)
        print(f"{label}: median {statistics.median(times):.2f} s, max {max(times):.2f} s")


if __name__ == "__main__":
    main()
