"""How much memory reading a large pairs file takes: one copy of the data, not two.

    python tools/read_memory.py [--lines 1000000] [--folder /tmp]

Writes a TSV file of `--lines` distinct English/French-like pairs (made by joining the
shipped real pairs, as the tokenizer benchmark does), then reads it as the `pairs` task
does (`PairsTask._read`: `experiments.data.records.read_rows` one row at a time, exact
duplicates dropped) under `tracemalloc`, and prints the file's size, the memory the kept
pairs hold (their strings and the list), and the peak memory Python allocated while
reading. A reader that held the file (or its lines) besides the pairs would peak at about
twice what the pairs hold; one row at a time, the peak is the pairs plus the set of rows
seen (which the duplicate check needs) and one row.
"""

from __future__ import annotations

import argparse
import sys
import tracemalloc
from pathlib import Path

from experiments.bench.cases.text import corpus
from experiments.tasks.pairs import PairsTask


def deep_size(pairs: list[tuple[str, str]]) -> int:
    """Bytes of the list, its tuples and their strings."""
    size = sys.getsizeof(pairs)
    for pair in pairs:
        size += sys.getsizeof(pair) + sum(sys.getsizeof(text) for text in pair)
    return size


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--folder", type=Path, default=Path("/tmp"))
    args = parser.parse_args(argv)
    path = args.folder / f"pairs_{args.lines}.tsv"
    texts = corpus(args.lines, seed=0)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("source\ttarget\n")
        for i in range(args.lines):
            handle.write(f"{texts[2 * i]} ({i})\t{texts[2 * i + 1]} ({i})\n")
    del texts
    section = PairsTask(name="pairs", path=str(path))
    tracemalloc.start()
    pairs, duplicates = section._read("task.path", str(path))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    held = deep_size(pairs)
    print(f"file: {path} ({path.stat().st_size / 2**20:.1f} MiB, {args.lines} rows)")
    print(f"pairs kept: {len(pairs)} ({duplicates} duplicates), holding {held / 2**20:.1f} MiB")
    print(f"peak allocated while reading: {peak / 2**20:.1f} MiB ({peak / held:.2f} x the pairs)")
    path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
