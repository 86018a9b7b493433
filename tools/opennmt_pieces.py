"""A runner task's own training and validation rows as SentencePiece pieces, for OpenNMT-py.

    python tools/opennmt_pieces.py tools/real_text_sweep.yaml /tmp/onmt/data
    uv venv /work/onmt-venv && uv pip install -p /work/onmt-venv/bin/python \
        "OpenNMT-py==3.5.1" "numpy<2"
    cd /tmp/onmt/data && /work/onmt-venv/bin/onmt_train -config /path/to/tools/opennmt_rnn.yaml

Writes `train.src`, `train.tgt`, `val.src` and `val.tgt` (one row a line, the pieces the
runner trains on, space-separated: the training rows are the ids of the task's token
store, read back through its tokenizer) and `vocab.txt` (the tokenizer's vocabulary but
its four special ids, which OpenNMT-py adds itself, as `piece<TAB>1` lines): the same
rows, split, subwords and vocabulary size as the runner's. `tools/opennmt_rnn.yaml` is
OpenNMT-py's RNN at the toolkit comparison's size (LSTM 256, input feeding, additive
attention, batch 32) on these files, 4 epochs of the real-text pairs; docs/results/
real-text.md has the figures. Prints the rows and their tokens (source, and target with
one `</s>` a row, as the runner's `tokens_per_second` counts them).
"""

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's packages, not an installed copy

from experiments.config import load_config  # noqa: E402 - after the checkout is importable

SPECIAL_IDS = 4  # <pad>, <s>, </s>, <unk>


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("config", help="a runner config of a `pairs` task")
    parser.add_argument("out", type=Path, help="the folder to write into")
    parser.add_argument("--set", action="append", default=[], help="config overrides")
    args = parser.parse_args()
    task = load_config(args.config, args.set).task.build()
    pieces = task.tokenizer.get_vocabulary()
    args.out.mkdir(parents=True, exist_ok=True)

    def line(ids):
        return " ".join(pieces[i] for i in ids) + "\n"

    store = task.train.store
    rows = np.arange(len(store))
    for field, suffix in (("source", "src"), ("target", "tgt")):
        with open(args.out / f"train.{suffix}", "w", encoding="utf-8") as f:
            f.writelines(line(ids) for ids in store.rows(field, rows))
    with (
        open(args.out / "val.src", "w", encoding="utf-8") as sources,
        open(args.out / "val.tgt", "w", encoding="utf-8") as targets,
    ):
        for source, target in task.val.texts:
            sources.write(line(task.tokenizer.encode(source)))
            targets.write(line(task.tokenizer.encode(target)))
    with open(args.out / "vocab.txt", "w", encoding="utf-8") as f:
        f.writelines(f"{piece}\t1\n" for piece in pieces[SPECIAL_IDS:])
    source_tokens, target_tokens = store.tokens("source"), store.tokens("target") + len(store)
    print(
        f"{len(store)} training rows: {source_tokens} source and {target_tokens} target tokens "
        f"({source_tokens + target_tokens} an epoch); {len(task.val.texts)} validation rows; "
        f"{len(pieces)} pieces; written to {args.out}"
    )


if __name__ == "__main__":
    main()
