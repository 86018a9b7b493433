"""`copy_slots`: templated sentences rewritten into another order, with slot words to copy.

"meet Zubaro at Quaybridge on friday" -> "on friday Zubaro meets you at Quaybridge": each
template has slots (names, places, numbers, days) and a rewrite of the sentence. Names and
places are pronounceable words made of random syllables, numbers random integers; each
pool is split once into the words of the training rows and the held-out words of the
validation and test rows, so no held-out word is ever in a training sentence. The
vocabulary holds the words of at least `min_count` training rows, so every held-out slot
word (and a rare training one) is unknown to it: a model has to copy it from the source
(`model.copy: true`); one without copy attention can only write `<unk>`.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Literal

import numpy as np
from pydantic import Field

from experiments import kinds, tasks
from experiments.data.sections import NUM_EXAMPLES, TaskSection
from experiments.data.split import copy_split, duplicate_count
from experiments.data.task import Task
from experiments.data.vocab import Vocab
from experiments.errors import invalid_config

# (source, target): `{slot}` is a slot word, `{slot2}` a second one of the same pool.
TEMPLATES = (
    ("meet {name} at {place} on {day}", "on {day} {name} meets you at {place}"),
    ("{name} flies from {place} to {place2}", "from {place} to {place2} flies {name}"),
    ("send {number} boxes to {name} in {place}", "{name} in {place} receives {number} boxes"),
    ("{name} and {name2} visit {place} on {day}", "on {day} {place} hosts {name2} and {name}"),
    ("call {name} about the {number} tickets", "the {number} tickets : call {name}"),
    ("{name} lives in {place}", "{place} is home to {name}"),
)
DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
ONSETS = (
    *("b", "br", "d", "dr", "f", "g", "gr", "h", "j", "k", "kl", "l", "m", "n"),
    *("p", "pr", "qu", "r", "s", "sh", "st", "t", "tr", "v", "w", "z", "zb"),
)
VOWELS = ("a", "e", "i", "o", "u", "ai", "ei", "ou", "y")
CODAS = ("", "", "", "n", "r", "l", "s", "k", "m")
PLACE_ENDINGS = ("bridge", "ton", "ford", "ham", "wick", "field", "port", "stead", "by", "mouth")
_SLOT = re.compile(r"\{(\w+?)2?\}")


@tasks.register
class CopySlotsTask(TaskSection):
    """Templated sentences rewritten into another order, their slot words (names, places,
    numbers) to be copied: the validation and test rows hold only slot words no training row
    holds, unknown to the vocabulary (made of the training words seen in `min_count` rows)."""

    name: Literal["copy_slots"]
    num_examples: int = Field(4000, ge=16, description=NUM_EXAMPLES)
    pool_size: int = Field(
        3000,
        ge=8,
        le=100_000,
        description="Words in each pool of slot words (names, places, numbers).",
    )
    held_out_fraction: float = Field(
        0.25,
        gt=0.0,
        lt=1.0,
        description="Of each pool, the share of words only the validation and test rows use.",
    )
    min_count: int = Field(
        4,
        ge=1,
        description="Training words in fewer rows are left out of the vocabulary (copied, "
        "not generated).",
    )

    def build(self) -> Task:
        """Rows from `TEMPLATES` with slot words drawn from pools of `pool_size` words each (see
        the module docstring), the validation and test rows from the held-out words only."""
        rng = np.random.default_rng(self.seed)
        taken: set[str] = set()  # no word in two pools
        pools = {
            "name": _words(rng, self.pool_size, _name, taken),
            "place": _words(rng, self.pool_size, _place, taken),
            "number": [str(n) for n in rng.permutation(np.arange(10, 10 + self.pool_size))],
        }
        held = {
            kind: _held_out(len(words), self.held_out_fraction) for kind, words in pools.items()
        }
        train_pools = {kind: words[held[kind] :] for kind, words in pools.items()}
        held_pools = {kind: words[: held[kind]] for kind, words in pools.items()}
        train_pools["day"] = held_pools["day"] = list(DAYS)  # in the vocabulary: generated
        n_val = max(1, int(round(self.num_examples * self.val_fraction)))
        n_test = max(1, int(round(self.num_examples * self.test_fraction)))
        train = [_row(rng, train_pools) for _ in range(self.num_examples - n_val - n_test)]
        held_rows = _distinct_rows(rng, held_pools, n_val + n_test)  # no input in both
        if len(held_rows) < n_val + n_test:
            raise invalid_config(
                "task.pool_size",
                self.pool_size,
                f"pools whose held-out words make {n_val + n_test} distinct validation and test "
                f"sentences (these made {len(held_rows)}): a larger task.pool_size or "
                "task.held_out_fraction",
            )
        rows = {"train": train, "val": held_rows[:n_val], "test": held_rows[n_val:]}
        counts = Counter(  # in how many training rows each word is
            word for source, target, _ in train for word in set(f"{source} {target}".split())
        )
        vocab = Vocab(sorted(w for w, c in counts.items() if c >= self.min_count), joiner=" ")
        tokenizer = vocab.tokenizer(split="whitespace")
        splits = {
            name: copy_split([(s, t) for s, t, _ in part], tokenizer, [a for _, _, a in part])
            for name, part in rows.items()
        }
        return Task(
            self.name,
            kinds.get("seq2seq"),
            vocab,
            splits["train"],
            splits["val"],
            splits["test"],
            splits["test"].take(slice(0, self.num_probes)),
            target_vocab=vocab,
            tokenizer=tokenizer,
            duplicate_rows=duplicate_count([source for source, _, _ in train]),
        )


def _row(rng, pools: dict[str, list[str]]) -> tuple[str, str, list[int]]:
    """One (source, target, alignment) of a random template: each target slot word is
    aligned with its position in the source, every other target word with none (-1)."""
    source, target = TEMPLATES[int(rng.integers(len(TEMPLATES)))]
    fills = {}
    for slot in dict.fromkeys(_SLOT.findall(source)):  # a pool's second slot: another word
        count = source.count("{" + slot)
        picked = rng.choice(len(pools[slot]), size=count, replace=False)
        fills[slot] = pools[slot][int(picked[0])]
        if count > 1:
            fills[slot + "2"] = pools[slot][int(picked[1])]
    source, target = source.format(**fills), target.format(**fills)
    slot_words = set(fills.values())
    position = {word: i for i, word in enumerate(source.split()) if word in slot_words}
    return source, target, [position.get(word, -1) for word in target.split()]


def _held_out(size: int, fraction: float) -> int:
    """How many words of a pool of `size` are held out: `fraction` of them, and at least two
    on each side (a template may take two words of one pool)."""
    return min(size - 2, max(2, int(round(size * fraction))))


def _distinct_rows(rng, pools: dict[str, list[str]], count: int) -> list[tuple]:
    """`count` rows (`_row`) whose sources all differ (fewer where the pools run out)."""
    rows: dict[str, tuple] = {}
    for _ in range(100 * count):
        row = _row(rng, pools)
        rows.setdefault(row[0], row)
        if len(rows) == count:
            break
    return list(rows.values())


def _words(rng, count: int, make, taken: set[str]) -> list[str]:
    """`count` words made by `make(rng)`, in the order drawn, none of them in `taken` (which
    they are added to)."""
    words = []
    while len(words) < count:
        word = make(rng)
        if word not in taken:
            taken.add(word)
            words.append(word)
    return words


def _syllable(rng) -> str:
    return "".join(part[int(rng.integers(len(part)))] for part in (ONSETS, VOWELS, CODAS))


def _name(rng) -> str:
    """A capitalised word of two or three random syllables ("Zubaro", "Kleistan")."""
    return "".join(_syllable(rng) for _ in range(int(rng.integers(2, 4)))).capitalize()


def _place(rng) -> str:
    """One or two random syllables and a place ending ("Quaybridge", "Troumford")."""
    stem = "".join(_syllable(rng) for _ in range(int(rng.integers(1, 3))))
    return (stem + PLACE_ENDINGS[int(rng.integers(len(PLACE_ENDINGS)))]).capitalize()
