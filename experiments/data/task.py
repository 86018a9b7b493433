"""The Task record: everything a run needs from a task."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from experiments.data.split import Split
from experiments.data.vocab import Vocab
from keras_attn_rnn.tokenizers import Tokenizer

if TYPE_CHECKING:  # the task module gives the kind object: the record never imports kinds
    from experiments.kinds.base import TaskKind


@dataclass
class Task:
    """Everything a run needs from a task.

    `kind` is the task's `TaskKind` object (`experiments.kinds.get(name)`, or
    one of a kind of the task's own), which decides the model, loss, metrics
    and artifacts. `vocab` is the input vocabulary, `target_vocab` the output
    one for seq2seq,
    `class_names` the label names for classification. `probes` are fixed
    examples plotted over the epochs. `generalization` holds test examples
    longer than any seen in training (length generalisation), or None.
    `tokenizer` turns a raw text into input ids over `vocab` (its tokens are
    `vocab.tokens`), as the task's builder made its inputs: the one
    `keras_attn_rnn.tokenizers.Tokenizer` the text card stores and the served text model
    encodes with; by default the characters of a text.
    `duplicate_rows` counts the rows whose input repeats an earlier row's
    (all copies of an input go to one split: `split.split_indices`).
    `length_buckets` are the `(first, last)` lengths (inclusive) the
    generalisation split is reported by (`length_buckets.buckets`), or None
    for at most three buckets of equal width.
    """

    name: str
    kind: TaskKind
    vocab: Vocab
    train: Split
    val: Split
    test: Split
    probes: Split
    target_vocab: Vocab | None = None
    class_names: list[str] | None = None
    prompts: list[str] = field(default_factory=list)
    generalization: Split | None = None
    tokenizer: Tokenizer | None = None
    duplicate_rows: int = 0
    length_buckets: list[tuple[int, int]] | None = None

    def __post_init__(self):
        if not hasattr(self.kind, "build_model"):
            raise ValueError(
                f"task {self.name!r}: kind must be a TaskKind object "
                f"(experiments.kinds.get(name)). Received: kind={self.kind!r}"
            )
        if self.tokenizer is None:
            self.tokenizer = self.vocab.tokenizer()
        if self.tokenizer.vocabulary != self.vocab.tokens:
            raise ValueError(
                f"task {self.name!r}: tokenizer.vocabulary must be the input vocabulary's tokens. "
                f"Received: {len(self.tokenizer.vocabulary)} tokens for a vocabulary of "
                f"{len(self.vocab)}"
            )

    @property
    def output_vocab(self) -> Vocab:
        """The vocabulary of the model's predictions (seq2seq/LM)."""
        return self.target_vocab or self.vocab

    @property
    def max_oov(self) -> int:
        """The most unknown words one source holds (`Split.oov`), over every split; 0 without."""
        return max(
            (len(words) for split in self.splits().values() for words in split.oov or ()),
            default=0,
        )

    def splits(self) -> dict[str, Split]:
        """Every split by name: train, val, test, probes and, where there is one, generalization."""
        names = ("train", "val", "test", "probes", "generalization")
        return {name: getattr(self, name) for name in names if getattr(self, name) is not None}

    def with_splits(self, change: Callable[[Split], Split]) -> Task:
        """A copy with every split `s` replaced by `change(s)`."""
        return dataclasses.replace(
            self, **{name: change(split) for name, split in self.splits().items()}
        )

    def vocabularies(self) -> dict:
        """All vocabularies and label names, for the vocab artifact."""
        out = {"input": self.vocab.to_dict()}
        if self.target_vocab is not None:
            out["target"] = self.target_vocab.to_dict()
        if self.class_names is not None:
            out["classes"] = list(self.class_names)
        return out
