"""`scan`: SCAN's commands and their action sequences, generated from its grammar; the
length split."""

from __future__ import annotations

import itertools
from typing import Literal

import numpy as np
from pydantic import Field, field_validator

from experiments import kinds, tasks
from experiments.data.sections import TaskSection, bucket_starts
from experiments.data.split import (
    bucket_ranges,
    duplicate_count,
    generalization_rng,
    make_splits,
    row_keys,
    seq2seq_split,
)
from experiments.data.task import Task
from experiments.data.vocab import Vocab

PRIMITIVES = {"walk": "I_WALK", "look": "I_LOOK", "run": "I_RUN", "jump": "I_JUMP"}
TURNS = {"left": "I_TURN_LEFT", "right": "I_TURN_RIGHT"}
# SCAN's length split (Lake & Baroni 2018): train on commands of up to 22 actions, test on
# those of 24 to 48 (no command has 23).
TRAIN_ACTIONS = 22
TEST_ACTIONS = (24, 48)


@tasks.register
class ScanTask(TaskSection):
    """SCAN commands and their action sequences (Lake & Baroni 2018), length split."""

    name: Literal["scan"]
    train_size: int | None = Field(
        None,
        ge=16,
        description="Training rows kept (after validation and test are held out of the "
        "short commands); unset: all.",
    )
    length_buckets: list[int] = Field(
        default_factory=lambda: [24, 29, 34],
        description="The first action count of each reported bucket of the longer commands.",
    )

    @field_validator("length_buckets")
    @classmethod
    def _buckets_of_the_longer_commands(cls, value: list[int]) -> list[int]:
        wrong = bucket_starts(value, *TEST_ACTIONS)
        if wrong:
            raise ValueError(wrong)
        return value

    def build(self) -> Task:
        """SCAN (Lake & Baroni 2018, "Generalization without systematicity"; the data of
        github.com/brendenlake/SCAN), its length split.

        Every command of the grammar (`commands`: 20,910) with its action sequence; commands
        of up to 22 actions (16,990) are the training pool, from which the validation and
        test rows (`val_fraction`, `test_fraction`) are held out and the training rows kept
        (`train_size` of them, or all); the 3,920 commands of 24 to 48 actions (none has 23)
        are the generalisation split, shuffled by its own stream of the seed and reported in
        the buckets starting at `length_buckets` (default 24-28, 29-33, 34-48). A row's
        length is its number of actions. Commands and actions are words (`I_TURN_LEFT`).
        """
        rng = np.random.default_rng(self.seed)
        pairs = commands()
        vocab = Vocab(sorted({word for command in pairs for word in command.split()}), joiner=" ")
        target_vocab = Vocab([*TURNS.values(), *PRIMITIVES.values()], joiner=" ")
        tokenizer = vocab.tokenizer(split="whitespace")
        answers = target_vocab.tokenizer(split="whitespace")
        short = [(c, a) for c, a in pairs.items() if len(a) <= TRAIN_ACTIONS]
        longer = [(c, a) for c, a in pairs.items() if len(a) >= TEST_ACTIONS[0]]
        data = _encode(short, tokenizer, answers)
        train, val, test, probes = make_splits(data, self, rng)
        if self.train_size is not None:
            train = train.take(slice(0, self.train_size))  # the training rows come shuffled
        order = generalization_rng(self.seed).permutation(len(longer))
        return Task(
            self.name,
            kinds.get("seq2seq"),
            vocab,
            train,
            val,
            test,
            probes,
            target_vocab=target_vocab,
            generalization=_encode([longer[i] for i in order], tokenizer, answers),
            tokenizer=tokenizer,
            duplicate_rows=duplicate_count(row_keys(data.x)),
            length_buckets=bucket_ranges(self.length_buckets, TEST_ACTIONS[1]),
        )


def _encode(rows, tokenizer, answers):
    """(command, actions) rows as a split; a row's length is its number of actions."""
    pairs = [(command, " ".join(actions)) for command, actions in rows]
    return seq2seq_split(pairs, tokenizer, answers, lengths=[len(a) for _, a in rows])


def phrases() -> dict[str, list[str]]:
    """The 34 verb phrases (`V`) and their actions: `U`, `D`, and `U`/`turn` `opposite` or
    `around` `left`/`right`."""
    out = {}
    for verb, action in [*PRIMITIVES.items(), ("turn", None)]:
        acts = [] if action is None else [action]
        if action is not None:
            out[verb] = acts  # V -> U
        for direction, turn in TURNS.items():
            out[f"{verb} {direction}"] = [turn, *acts]  # V -> D
            out[f"{verb} opposite {direction}"] = [turn, turn, *acts]
            out[f"{verb} around {direction}"] = [turn, *acts] * 4
    return out


def commands() -> dict[str, list[str]]:
    """Every SCAN command and its action sequence, from the grammar of Lake & Baroni (2018):

        C -> S and S | S after S | S        S -> V twice | V thrice | V
        V -> U opposite W | U around W | turn opposite W | turn around W | D | U
        D -> U W | turn W                   U -> walk | look | run | jump
        W -> left | right

    interpreted as `[[x and y]] = [[x]] [[y]]`, `[[x after y]] = [[y]] [[x]]`, `[[x twice]]`
    and `[[x thrice]]` two and three times `[[x]]`, `[[u W]] = TURN_W [[u]]`,
    `[[u opposite W]] = TURN_W TURN_W [[u]]`, `[[u around W]]` four times `TURN_W [[u]]`
    (`[[turn]]` being nothing). 20,910 commands: the lines of the original `tasks.txt`,
    and its length split's `tasks_train_length.txt` (16,990) and `tasks_test_length.txt`
    (3,920), pair for pair (checked against those files when this was written).
    """
    sentences = {}
    for phrase, actions in phrases().items():
        sentences[phrase] = actions
        sentences[f"{phrase} twice"] = actions * 2
        sentences[f"{phrase} thrice"] = actions * 3
    out = dict(sentences)
    for (first, x), (second, y) in itertools.product(sentences.items(), repeat=2):
        out[f"{first} and {second}"] = x + y
        out[f"{first} after {second}"] = y + x
    return out
