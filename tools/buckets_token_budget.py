"""Length-bucketed batches with a token budget instead of a row count: the validation loss
after each epoch, beside `length_buckets_speedup`'s two feeds (the bench's shapes).

    python -m tools.buckets_token_budget PAIRS.tsv [--epochs 5]

The budget is the mean padded (source + target) tokens of `batch_size` rows, so a batch holds
as many tokens on average as a batch of rows does, and every batch about the same number
(fairseq's `--max-tokens`). Prints the budget, the batches an epoch, and the cumulative `fit`
seconds and validation losses as JSON.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from experiments.bench.cases import corpus
from experiments.bench.cases.common import Options
from experiments.training.batches import LengthBatches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", help="a pairs file (TSV/CSV/JSONL, source and target)")
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()
    options = Options(profile="full")
    cfg, task = corpus.bucket_task(args.pairs, options)
    sources, targets = task.train.lengths()
    padded = -(-sources // 4) * 4 + -(-targets // 4) * 4
    budget = int(cfg.train.batch_size * np.mean(padded))
    feed = LengthBatches(task.train, cfg.train.batch_size, cfg.train.seed, batch_tokens=budget)
    print(f"budget {budget} tokens, {len(feed)} batches an epoch", flush=True)
    print(json.dumps(corpus.fit_epochs(task, cfg, feed, args.epochs, options)))


if __name__ == "__main__":
    main()
