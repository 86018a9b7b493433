"""What decides the cache entry of a corpus of rows (two fields of a file's rows), shared by
the pairs corpus (`experiments.data.corpus`) and the labelled one
(`experiments.data.label_corpus`)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar


@dataclass
class RowSettings:
    """The settings every corpus of rows has, besides the file: the two fields read, how
    rows are split, sampled and cut, and what identifies the tokenizer.

    A corpus adds its own fields; `key()` is what changes the result (its fingerprint's
    input): every field but the callables that make the corpus's tokenizers (named in
    `UNKEYED`, identified by `tokenizer_key` instead), under the corpus's `CACHE_FORMAT` (a name
    and a number bumped when the layout or the meaning of an entry changes).
    """

    CACHE_FORMAT: ClassVar[tuple[str, int]]
    UNKEYED: ClassVar[tuple[str, ...]] = ()

    fields: tuple
    seed: int
    val_fraction: float
    test_fraction: float
    max_eval_rows: int
    sample_rows: int
    max_row_chars: int
    length_percentile: float
    tokenizer_key: dict

    def key(self) -> dict:
        out = {
            field.name: getattr(self, field.name)
            for field in fields(self)
            if field.name not in self.UNKEYED
        }
        out["fields"] = list(self.fields)
        name, number = self.CACHE_FORMAT
        return {name: number, **out}
