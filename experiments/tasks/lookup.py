"""`lookup`: long lookup tables; apply random functions on bit strings in turn and write out
every intermediate result."""

from __future__ import annotations

import itertools
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from experiments import kinds, tasks
from experiments.data.sections import NUM_EXAMPLES, TaskSection
from experiments.data.split import (
    duplicate_count,
    generalization_rng,
    make_splits,
    row_keys,
    seq2seq_split,
)
from experiments.data.task import Task
from experiments.data.vocab import Vocab


@tasks.register
class LookupTask(TaskSection):
    """Long lookup tables (Liška et al. 2018; Dubois et al. 2020): an input bit string and
    the tables to apply to it in turn; the target is the input and each intermediate result."""

    name: Literal["lookup"]
    num_tables: int = Field(8, ge=1, le=26, description="Random tables to draw from.")
    bits: int = Field(3, ge=1, le=6, description="Bits of the strings the tables map.")
    bijective: bool = Field(
        True,
        description="Each table a permutation of the bit strings (as Dubois et al.'s).",
    )
    num_examples: int = Field(10000, ge=16, description=NUM_EXAMPLES)
    train_compositions: int = Field(
        4, ge=1, le=16, description="Tables per training input: 1 to this many."
    )
    test_compositions: int | None = Field(
        9,
        ge=2,
        le=64,
        description="Length generalisation: also test on `train_compositions` + 1 to this "
        "many tables.",
    )
    reversed: bool = Field(
        False,
        description='The tables written in the order of t3(t2(t1(x))): "t3 t2 t1 000".',
    )

    @model_validator(mode="after")
    def _more_test_compositions(self) -> LookupTask:
        if self.test_compositions is not None and (
            self.test_compositions <= self.train_compositions
        ):
            raise ValueError(
                f"task.test_compositions > task.train_compositions, "
                f"got {self.test_compositions} <= {self.train_compositions}"
            )
        return self

    def build(self) -> Task:
        """Compositions of `num_tables` random tables `t1..tN` on `bits`-bit strings.

        The long lookup tables of Liška et al. (2018, "Memorize or generalize? Searching for a
        compositional RNN in a haystack") as Dubois et al. (2020, "Location attention for
        extrapolation to longer sequences") generate them: `table_lookup_dataset` of
        `LongLookupTables/make_lookup_tables.py` in github.com/i-machine-think/machine-tasks,
        with its defaults `is_copy_input` and `is_intermediate`:

        - the tables are drawn from the task seed: each a random permutation of the bit
          strings, as in that generator (with `bijective: false`, any random function);
        - an input is a bit string and the tables to apply, in the order they apply:
          `000 t1 t5 t3` is `t3(t5(t1(000)))`; with `reversed` (their reverse lookup
          tables, `is_reverse`) the tables are written as the composition is, `t3 t5 t1 000`;
        - the target is the input and each intermediate result, the same in both variants:
          `000 t1(000) t5(t1(000)) t3(t5(t1(000)))`, e.g. `000 110 011 101`;
        - target step `i` attends the input bits (`i = 0`) or the `i`-th table applied.

        Training rows are distinct (input, tables) pairs of 1 to `train_compositions` tables,
        `num_examples` of them shared out over the numbers of tables as evenly as each allows
        (with 10,000: all 64 rows of one table, all 512 of two, 4,096 of three, 5,328 of
        four), each number's drawn uniformly; every one of them (37,440 by default, which
        Dubois et al. train on) when `num_examples` is that many or more. With
        `test_compositions`, a generalisation split of as many rows as the test split goes
        round `train_compositions + 1 .. test_compositions` tables, drawn from its own
        stream, and is reported per number of tables. A row's length is its number of tables.

        Left out of the original: the end token `.` of each input (the encoder reads the whole
        source), and the held-out tables, compositions and inputs of its other test sets.
        """
        rng = np.random.default_rng(self.seed)
        tables = draw_tables(rng, self.num_tables, self.bits, self.bijective)
        names = list(tables)
        strings = bit_strings(self.bits)
        vocab = Vocab([*strings, *names], joiner=" ")
        target_vocab = Vocab(strings, joiner=" ")
        tokenizer = vocab.tokenizer(split="whitespace")
        answers = target_vocab.tokenizer(split="whitespace")
        counts = range(1, self.train_compositions + 1)
        quotas = _spread(self.num_examples, [len(strings) * len(names) ** k for k in counts])
        rows = []
        for k, quota in zip(counts, quotas):
            rows += _rows_of(rng, strings, names, k, quota)
        data = _encode(rows, tables, self.reversed, tokenizer, answers)
        train, val, test, probes = make_splits(data, self, rng)
        generalization, length_buckets = None, None
        if self.test_compositions is not None:
            longer = range(self.train_compositions + 1, self.test_compositions + 1)
            generalization = _encode(
                _longer_rows(generalization_rng(self.seed), strings, names, longer, len(test)),
                tables,
                self.reversed,
                tokenizer,
                answers,
            )
            length_buckets = [(k, k) for k in longer]
        return Task(
            self.name,
            kinds.get("seq2seq"),
            vocab,
            train,
            val,
            test,
            probes,
            target_vocab=target_vocab,
            generalization=generalization,
            tokenizer=tokenizer,
            duplicate_rows=duplicate_count(row_keys(data.x)),
            length_buckets=length_buckets,
        )


def bit_strings(bits: int) -> list[str]:
    """Every string of `bits` bits, in order: `000`, `001`, ... `111`."""
    return ["".join(p) for p in itertools.product("01", repeat=bits)]


def draw_tables(rng, count: int, bits: int, bijective: bool = True) -> dict[str, dict]:
    """`{"t1": {"000": "101", ...}, ...}`: `count` random functions on `bits`-bit strings,
    each a permutation with `bijective`."""
    strings = bit_strings(bits)
    tables = {}
    for i in range(count):
        if bijective:
            outputs = rng.permutation(len(strings))
        else:
            outputs = rng.integers(len(strings), size=len(strings))
        tables[f"t{i + 1}"] = {s: strings[o] for s, o in zip(strings, outputs)}
    return tables


def _spread(total: int, capacities: list[int]) -> list[int]:
    """How many rows of each group: `total` (at most the groups' capacity) shared out as
    evenly as the capacities allow, the shortest groups first."""
    out, left = [], min(total, sum(capacities))
    for i, capacity in enumerate(capacities):
        share = min(capacity, -(-left // (len(capacities) - i)))
        out.append(share)
        left -= share
    return out


def _rows_of(rng, strings, names, k: int, count: int) -> list[tuple[str, tuple[str, ...]]]:
    """`count` distinct (input, tables) pairs of `k` tables, drawn uniformly."""
    size = len(strings) * len(names) ** k
    if 2 * count >= size:  # most of them: a sample of them all, by index
        return [_row(int(i), strings, names, k) for i in rng.choice(size, count, replace=False)]
    rows, seen = [], set()
    while len(rows) < count:
        start = strings[int(rng.integers(len(strings)))]
        row = (start, tuple(names[int(i)] for i in rng.integers(len(names), size=k)))
        if row not in seen:
            seen.add(row)
            rows.append(row)
    return rows


def _row(index: int, strings, names, k: int) -> tuple[str, tuple[str, ...]]:
    """The `index`-th (input, tables) pair of `k` tables."""
    index, start = divmod(index, len(strings))
    applied = []
    for _ in range(k):
        index, table = divmod(index, len(names))
        applied.append(names[table])
    return strings[start], tuple(applied)


def _longer_rows(rng, strings, names, counts: range, wanted: int) -> list:
    """`wanted` distinct rows (or as many as there are) going round the numbers of tables
    `counts`, as many of each as they hold."""
    capacities = [len(strings) * len(names) ** k for k in counts]
    groups = [
        _rows_of(rng, strings, names, k, n) for k, n in zip(counts, _spread(wanted, capacities))
    ]
    return [row for turn in itertools.zip_longest(*groups) for row in turn if row is not None]


def _encode(rows, tables: dict, reverse: bool, tokenizer, answers):
    """Source, target, alignment and number of tables of each (input, tables) row."""
    pairs, alignments, lengths = [], [], []
    for start, applied in rows:
        results = [start]
        for name in applied:
            results.append(tables[name][results[-1]])
        k = len(applied)
        source = [*applied[::-1], start] if reverse else [start, *applied]
        pairs.append((" ".join(source), " ".join(results)))
        alignments.append([k - i for i in range(k + 1)] if reverse else list(range(k + 1)))
        lengths.append(k)
    return seq2seq_split(pairs, tokenizer, answers, alignments, lengths)
