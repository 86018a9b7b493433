"""A small real topic-classification set from Debian's `fortunes` files, as a text,label CSV.

    python tools/fortunes_dataset.py OUT.csv [--per-class 230] [--max-chars 300] [--seed 0]

Reads the category files of the `fortunes` package (`/usr/share/games/fortunes/<category>`,
fortunes separated by lines holding only `%`), keeps the fortunes under `--max-chars`
characters (whitespace collapsed, terminal overstrike sequences removed), drops texts that
occur in more than one category or twice, and samples `--per-class` of each category with
`--seed`: 7 topics x 230 = 1,610 short real texts by default. The same files and seed give the
same CSV. Used by `tools/realtext_benchmark.py`; the data is not committed.
"""

from __future__ import annotations

import argparse
import csv
import random
import re
import sys
from collections import Counter
from pathlib import Path

FORTUNES = Path("/usr/share/games/fortunes")
CATEGORIES = ("computers", "linux", "men-women", "politics", "science", "songs-poems", "work")
SEPARATOR = re.compile(r"^%\s*$", re.MULTILINE)
OVERSTRIKE = re.compile(r"[^\x08]\x08")  # "_\bA", "__\b\bAB": a teletype's underline or bold


def fortunes(path: Path) -> list[str]:
    """The fortunes of one category file, each on one line."""
    text = path.read_bytes().decode("utf-8", errors="replace")
    while OVERSTRIKE.search(text):  # innermost pair first: "__\b\b" takes two rounds
        text = OVERSTRIKE.sub("", text)
    texts = (" ".join(part.replace("\x08", "").split()) for part in SEPARATOR.split(text))
    return [t for t in texts if t]


def rows(
    folder: Path, categories: tuple[str, ...], per_class: int, max_chars: int, seed: int
) -> list[tuple[str, str]]:
    """`per_class` (text, category) rows of each category, shuffled with `seed`."""
    found = {
        name: [t for t in fortunes(folder / name) if len(t) < max_chars] for name in categories
    }
    counts = Counter(t for texts in found.values() for t in texts)
    rng = random.Random(seed)
    out = []
    for name in categories:
        unique = sorted({t for t in found[name] if counts[t] == 1})
        if len(unique) < per_class:
            raise SystemExit(
                f"{folder / name}: {len(unique)} distinct fortunes under {max_chars} characters; "
                f"expected at least --per-class {per_class}"
            )
        out += [(t, name) for t in rng.sample(unique, per_class)]
    rng.shuffle(out)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the CSV to write (text,label)")
    parser.add_argument("--folder", type=Path, default=FORTUNES)
    parser.add_argument("--categories", nargs="+", default=list(CATEGORIES))
    parser.add_argument("--per-class", type=int, default=230)
    parser.add_argument("--max-chars", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        raise SystemExit(f"{args.folder}: no such folder (apt-get install fortunes)")
    data = rows(args.folder, tuple(args.categories), args.per_class, args.max_chars, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        writer.writerows(data)
    print(f"{args.out}: {len(data)} rows, {len(args.categories)} labels", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
