"""The text benchmark: learning subword units on a corpus of pairs, against a time budget."""

from __future__ import annotations

import csv
import random

from experiments import ready_configs
from experiments.bench import timing
from experiments.bench.cases.common import Options
from experiments.data import units

# Learning the tokenizer of 100,000 pairs must take at most this (2 CPU cores).
BUDGET_SECONDS = 30.0
SAMPLE = "data/software_en_fr.tsv"  # real pairs that ship with the ready configs


def corpus(pairs: int, seed: int) -> list[str]:
    """The sources and targets of `pairs` distinct pairs made of the shipped real pairs: each
    a random two of them joined (real words and sentences, and as many distinct texts as a
    corpus of that size has)."""
    with open(ready_configs.directory() / SAMPLE, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    rng = random.Random(seed)
    texts = []
    for _ in range(pairs):
        (a, b), (c, d) = rng.choice(rows), rng.choice(rows)
        texts += [f"{a} {c}", f"{b} {d}"]
    return texts


def tokenizer_training(options: Options) -> dict:
    """`SentencePieceTokenizer.adapt` (unigram, shared by both sides, as `pairs` learns it on
    its training split) on the sources and targets of `pairs` pairs, against the budget of
    `BUDGET_SECONDS`: the ratio is the time over the budget (goal <= 1: within it). The
    peer's times are the budget itself."""
    size = options.sizes["tokenizer"]
    texts = corpus(size["pairs"], options.seed)

    def learn():
        tokenizer = units.tokenizer("subword", size["vocabulary_size"])
        tokenizer.adapt(texts)
        return tokenizer

    repeats = options.repeats["slow"]
    times = [timing.clock(learn) for _ in range(repeats)]
    out = timing.summarize(times, [BUDGET_SECONDS] * repeats, speedup=False)
    out.update(
        shapes={**size, "texts": len(texts), "characters": sum(map(len, texts))},
        project=f"SentencePieceTokenizer.adapt on {size['pairs']} pairs (unigram, shared)",
        peer=f"the {BUDGET_SECONDS:.0f} s budget",
    )
    return out
