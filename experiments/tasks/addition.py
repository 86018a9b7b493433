"""`addition`: "535+61" -> "596", following the keras.io addition example."""

from __future__ import annotations

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
class AdditionTask(TaskSection):
    """`"535+61" -> "596"`, as in the keras.io addition example."""

    name: Literal["addition"]
    num_examples: int = Field(50000, ge=16, description=NUM_EXAMPLES)
    digits: int = Field(3, ge=1, le=6, description="The most digits of an operand.")
    reverse_input: bool = Field(True, description="Feed the question reversed.")
    test_digits: int | None = Field(
        None,
        ge=2,
        le=12,
        description="Length generalisation: also test on operands of `digits` + 1 to this "
        "many digits.",
    )

    @model_validator(mode="after")
    def _more_test_digits(self) -> AdditionTask:
        if self.test_digits is not None and self.test_digits <= self.digits:
            raise ValueError(
                f"task.test_digits > task.digits, got {self.test_digits} <= {self.digits}"
            )
        return self

    def build(self) -> Task:
        """Unique questions `a+b` with up to `digits` digits per operand.

        As in the keras.io example the question is padded with spaces to
        `2 * digits + 1` characters and (by default) reversed, and the answer is
        padded with spaces to `digits + 1` characters. With `test_digits`, a
        generalisation split (as many questions as the test split) has a longer
        operand of `digits + 1 .. test_digits` digits: its questions are padded to
        their own width, its answers as the training answers are (so a correct sum
        reads the same in every split; a longer sum is its digits alone).
        """
        rng = np.random.default_rng(self.seed)
        capacity = (10**self.digits) * (10**self.digits + 1) // 2
        vocab = Vocab(list("0123456789+ "))
        # a question is padded to the width of two operands and "+", and reversed if asked
        tokenizer = vocab.tokenizer(pad_to=2 * self.digits + 1, reverse=self.reverse_input)
        answers = vocab.tokenizer()  # each character a token
        seen = set()
        wanted = min(self.num_examples, capacity)
        data = _questions(rng, tokenizer, answers, wanted, self.digits, seen)
        train, val, test, probes = make_splits(data, self, rng)
        generalization = None
        if self.test_digits is not None:
            generalization = _longer_questions(
                generalization_rng(self.seed), self, tokenizer, answers, len(test), seen
            )
        return Task(
            self.name,
            kinds.get("seq2seq"),
            vocab,
            train,
            val,
            test,
            probes,
            target_vocab=vocab,
            generalization=generalization,
            duplicate_rows=duplicate_count(row_keys(data.x)),
            tokenizer=tokenizer,
        )


def _questions(rng, tokenizer, answers, wanted: int, digits: int, seen: set):
    """`wanted` unseen questions with operands of up to `digits` digits, encoded by
    `tokenizer` (answers by `answers`); their length is the longer operand's digit count."""
    pairs, lengths = [], []
    while len(pairs) < wanted:
        for a, b in _numbers(rng, digits, 2 * wanted).reshape(-1, 2).tolist():
            key = (min(a, b), max(a, b))
            if key in seen or len(pairs) == wanted:
                continue
            seen.add(key)
            pairs.append((f"{a}+{b}", answer(a, b, digits)))
            lengths.append(len(str(key[1])))
    return seq2seq_split(pairs, tokenizer, answers, lengths=lengths)


def _longer_questions(rng, cfg, tokenizer, answers, wanted: int, seen: set):
    """`wanted` unseen questions whose longer operand has `digits + 1 .. test_digits` digits,
    going round the sizes (as many of each); padded to `test_digits` operands, their answers
    to the training width (`digits + 1`)."""
    tokenizer = tokenizer.replace(pad_to=2 * cfg.test_digits + 1)
    sizes = range(cfg.digits + 1, cfg.test_digits + 1)
    pairs, lengths = [], []
    while len(pairs) < wanted:
        size = sizes[len(pairs) % len(sizes)]
        a = int(rng.integers(10 ** (size - 1), 10**size))
        b = int(_numbers(rng, size, 1)[0])
        a, b = (a, b) if rng.random() < 0.5 else (b, a)
        key = (min(a, b), max(a, b))
        if key in seen:
            continue
        seen.add(key)
        pairs.append((f"{a}+{b}", answer(a, b, cfg.digits)))
        lengths.append(size)
    return seq2seq_split(pairs, tokenizer, answers, lengths=lengths)


def answer(a: int, b: int, digits: int) -> str:
    """The target text of `a+b` for operands of up to `digits` digits: the sum, padded with
    spaces to `digits + 1` characters (a longer sum is not cut)."""
    return str(a + b).ljust(digits + 1)


def _numbers(rng, digits: int, count: int) -> np.ndarray:
    """`count` numbers of 1..digits random digits each, as in the keras.io generator."""
    lengths = rng.integers(1, digits + 1, size=count)
    values = rng.integers(0, 10, size=(count, digits))
    powers = 10 ** np.arange(digits - 1, -1, -1)
    return (values * powers).sum(axis=1) // 10 ** (digits - lengths)
