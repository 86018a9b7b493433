"""The length generalisation benchmarks `copy`, `lookup` and `scan` (pure NumPy, no training
except the configs' trial builds): deterministic from the seed, split by length as specified,
and targets checked against an independent computation."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from experiments import config as config_lib
from experiments.data import length_buckets
from experiments.errors import ConfigError
from experiments.ready_configs import directory as configs_dir
from experiments.tasks import build_task, lookup, scan

SMALL = {
    "copy": {"name": "copy", "num_examples": 400},
    "lookup": {"name": "lookup", "num_examples": 600},
    "lookup_reversed": {"name": "lookup", "num_examples": 600, "reversed": True},
    "scan": {"name": "scan", "train_size": 500},
}


def _task(**task):
    return build_task(config_lib.validate({"task": task}).task)


def _splits(task):
    return {"train": task.train, "val": task.val, "test": task.test, "long": task.generalization}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_same_seed_same_rows_and_another_seed_other_rows(name):
    a, b = _task(**SMALL[name]), _task(**SMALL[name])
    for split, rows in _splits(a).items():
        other = _splits(b)[split]
        for field in ("x", "y", "x_dec", "length"):
            np.testing.assert_array_equal(getattr(rows, field), getattr(other, field), split)
    c = _task(**SMALL[name], seed=1)
    assert a.train.x.shape != c.train.x.shape or not np.array_equal(a.train.x, c.train.x)
    if name != "scan":  # SCAN's longer commands are the same 3,920, in another order
        assert not np.array_equal(a.generalization.x, c.generalization.x)
    else:
        assert not np.array_equal(a.generalization.x[:50], c.generalization.x[:50])


# --- copy -----------------------------------------------------------------------------


def test_copy_targets_are_the_inputs_aligned_step_by_step():
    task = _task(**SMALL["copy"])
    for split in _splits(task).values():
        for i in range(len(split)):
            source = task.vocab.decode(split.x[i])
            assert task.output_vocab.decode(split.y[i]) == source
            n = len(source)
            assert n == split.length[i]
            np.testing.assert_array_equal(split.alignment[i, :n], np.arange(n))
            assert np.all(split.alignment[i, n:] == -1)


def test_copy_trains_on_4_to_12_letters_and_reports_13_16_17_20_21_24_25_48():
    task = _task(**SMALL["copy"])
    for split in (task.train, task.val, task.test):
        assert split.length.min() == 4 and split.length.max() == 12
    longer = task.generalization
    assert sorted(set(longer.length.tolist())) == list(range(13, 49))  # every length
    assert len(longer) == len(task.test)
    np.testing.assert_array_equal((longer.x != 0).sum(1), longer.length)
    buckets = length_buckets.buckets(task)
    assert list(buckets) == ["len_4_12", "len_13_16", "len_17_20", "len_21_24", "len_25_48"]
    assert sum(len(b) for name, b in buckets.items() if name != "len_4_12") == len(longer)
    for name, split in buckets.items():
        low, high = map(int, name.split("_")[1:])
        assert split.length.min() == low and split.length.max() == high, name


def test_reverse_takes_the_same_buckets_and_keeps_its_default():
    common = {"name": "reverse", "num_examples": 600, "min_length": 4, "max_length": 12}
    longer = {"test_min_length": 13, "test_max_length": 48}
    task = _task(**common, **longer, length_buckets=[13, 17, 21, 25])
    assert list(length_buckets.buckets(task)) == [
        "len_4_12",
        "len_13_16",
        "len_17_20",
        "len_21_24",
        "len_25_48",
    ]
    for row in range(3):  # still a reversal
        n = task.generalization.length[row]
        x = task.generalization.x[row, :n]
        np.testing.assert_array_equal(task.generalization.y[row, :n], x[::-1])
    # without length_buckets: three buckets of equal width, as before
    default = _task(**common, **longer)
    assert list(length_buckets.buckets(default))[1:] == ["len_13_24", "len_25_36", "len_37_48"]


@pytest.mark.parametrize(
    "task, needle",
    [
        ({"name": "reverse", "length_buckets": [11, 15]}, "needs task.test_min_length"),
        ({"name": "copy", "length_buckets": [14, 17]}, "increasing from 13"),
        ({"name": "copy", "length_buckets": [13, 21, 17]}, "increasing from 13"),
        ({"name": "copy", "length_buckets": [13, 49]}, "to at most 48"),
        ({"name": "scan", "length_buckets": [23, 30]}, "task.length_buckets"),
        ({"name": "lookup", "test_compositions": 4}, "task.test_compositions"),
    ],
)
def test_bad_buckets_and_lengths_are_refused(task, needle):
    with pytest.raises(ConfigError, match=needle):
        config_lib.validate({"task": task})


# --- lookup -----------------------------------------------------------------------------


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reversed"])
def test_lookup_targets_are_the_intermediate_results_of_the_seeded_tables(reverse):
    seed = 3
    task = _task(name="lookup", num_examples=600, reversed=reverse, seed=seed)
    tables = lookup.draw_tables(np.random.default_rng(seed), 8, 3)
    strings = [f"{i:03b}" for i in range(8)]
    assert set(tables) == {f"t{i}" for i in range(1, 9)}
    for table in tables.values():  # each a permutation of the 3-bit strings
        assert sorted(table) == strings and sorted(table.values()) == strings
    for split in _splits(task).values():
        for i in range(len(split)):
            tokens = task.vocab.decode(split.x[i]).split()
            k = len(tokens) - 1
            assert split.length[i] == k
            start = tokens[-1] if reverse else tokens[0]
            assert start in strings
            applied = tokens[:-1][::-1] if reverse else tokens[1:]  # in the order they apply
            expected = [start]
            for name in applied:
                expected.append(tables[name][expected[-1]])
            target = task.output_vocab.decode(split.y[i]).split()
            assert target == expected
            # step 0 attends the start bits, step j the j-th table applied
            attended = [tokens[p] for p in split.alignment[i, : k + 1]]
            assert attended == [start, *applied]


def test_lookup_format_follows_the_long_lookup_tables_example():
    # "000 t1 t5 t3" -> "000 110 011 101" with t1(000) = 110, t5(110) = 011, t3(011) = 101
    task = _task(name="lookup", num_examples=16, test_compositions=None)
    tables = {"t1": {"000": "110"}, "t5": {"110": "011"}, "t3": {"011": "101"}}
    for reverse, source in ((False, "000 t1 t5 t3"), (True, "t3 t5 t1 000")):
        rows = [("000", ("t1", "t5", "t3"))]
        answers = task.target_vocab.tokenizer(split="whitespace")
        split = lookup._encode(rows, tables, reverse, task.tokenizer, answers)
        assert task.vocab.decode(split.x[0]) == source
        assert task.output_vocab.decode(split.y[0]) == "000 110 011 101"


def test_lookup_trains_on_1_to_4_tables_and_reports_5_to_9_one_by_one():
    task = _task(name="lookup", num_examples=600)
    for split in (task.train, task.val, task.test):
        assert set(split.length.tolist()) <= {1, 2, 3, 4}
    every = np.concatenate([task.train.length, task.val.length, task.test.length])
    counts = collections.Counter(every.tolist())
    assert counts == {1: 64, 2: 179, 3: 179, 4: 178}  # even, all 8 x 8 single lookups
    assert task.duplicate_rows == 0
    longer = task.generalization
    assert collections.Counter(longer.length.tolist()) == {
        k: len(task.test) // 5 for k in range(5, 10)
    }
    assert list(length_buckets.buckets(task)) == [
        "len_1_4",
        "len_5_5",
        "len_6_6",
        "len_7_7",
        "len_8_8",
        "len_9_9",
    ]
    assert not {r.tobytes() for r in longer.x} & {r.tobytes() for r in task.train.x}


def test_lookup_with_enough_examples_has_every_composition_once():
    task = _task(name="lookup", num_examples=50_000, test_compositions=None)
    rows = {
        (task.vocab.decode(split.x[i]))
        for split in (task.train, task.val, task.test)
        for i in range(len(split))
    }
    assert len(rows) == sum(8 * 8**k for k in range(1, 5)) == 37_440
    assert task.generalization is None and length_buckets.buckets(task) == {}


def test_lookup_functions_need_not_be_bijective():
    rng = np.random.default_rng(0)
    tables = lookup.draw_tables(rng, 8, 3, bijective=False)
    assert any(len(set(table.values())) < 8 for table in tables.values())
    task = _task(name="lookup", num_examples=100, bijective=False, bits=2, num_tables=3)
    assert task.vocab.tokens[4:] == ["00", "01", "10", "11", "t1", "t2", "t3"]


# --- scan -------------------------------------------------------------------------------


def test_scan_grammar_has_20910_commands_16990_short_and_3920_long():
    commands = scan.commands()
    assert len(commands) == 20_910
    assert len(set(commands)) == 20_910
    sizes = collections.Counter(len(actions) for actions in commands.values())
    assert sum(n for size, n in sizes.items() if size <= 22) == 16_990
    assert sum(n for size, n in sizes.items() if 24 <= size <= 48) == 3_920
    assert 23 not in sizes and max(sizes) == 48
    assert len(scan.phrases()) == 34


@pytest.mark.parametrize(
    "command, actions",
    [  # the examples of github.com/brendenlake/SCAN's README and the paper
        ("jump", "JUMP"),
        ("jump left", "LTURN JUMP"),
        ("jump around right", "RTURN JUMP RTURN JUMP RTURN JUMP RTURN JUMP"),
        ("turn left twice", "LTURN LTURN"),
        ("jump thrice", "JUMP JUMP JUMP"),
        ("jump opposite left and walk thrice", "LTURN LTURN JUMP WALK WALK WALK"),
        (
            "jump opposite left after walk around left",
            "LTURN WALK LTURN WALK LTURN WALK LTURN WALK LTURN LTURN JUMP",
        ),
        ("turn around right", "RTURN RTURN RTURN RTURN"),
        ("turn opposite left thrice", "LTURN LTURN LTURN LTURN LTURN LTURN"),
    ],
)
def test_scan_interpretation(command, actions):
    names = {"LTURN": "I_TURN_LEFT", "RTURN": "I_TURN_RIGHT"}
    expected = [names.get(a, f"I_{a}") for a in actions.split()]
    assert scan.commands()[command] == expected


def test_scan_length_split_and_buckets():
    task = _task(name="scan")
    held = [task.train, task.val, task.test]
    assert sum(map(len, held)) == 16_990
    for split in held:
        assert split.length.max() <= 22
        assert np.array_equal((split.y != 0).sum(1) - 1, split.length)  # actions + </s>
    longer = task.generalization
    assert len(longer) == 3_920 and longer.length.min() == 24 and longer.length.max() == 48
    buckets = length_buckets.buckets(task)
    assert {name: len(split) for name, split in buckets.items()} == {
        f"len_1_{task.test.length.max()}": len(task.test),
        "len_24_28": 2_192,
        "len_29_33": 1_280,
        "len_34_48": 448,
    }
    train = {r.tobytes() for r in task.train.x}
    assert not train & {r.tobytes() for r in task.val.x}
    assert not train & {r.tobytes() for r in task.test.x}
    # decoded rows read as the grammar says
    commands = scan.commands()
    for split in (task.train, longer):
        for i in range(20):
            command = task.vocab.decode(split.x[i])
            assert task.output_vocab.decode(split.y[i]).split() == commands[command]


def test_scan_train_size_subsamples_training_rows_only():
    full, small = _task(name="scan"), _task(name="scan", train_size=500)
    assert len(small.train) == 500
    np.testing.assert_array_equal(small.train.x, full.train.x[:500])
    np.testing.assert_array_equal(small.val.x, full.val.x)
    np.testing.assert_array_equal(small.test.x, full.test.x)
    assert len(full.train) == 16_990 - len(full.val) - len(full.test)


# --- the ready configs --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["copy", "lookup", "scan"])
def test_ready_config_validates_with_a_trial_build(name):
    from experiments.training import run

    prepared = run.validate(config_lib.load_config(configs_dir() / f"{name}.yaml"))
    assert prepared.task.name == name
    assert prepared.task.generalization is not None
    assert prepared.cfg.generate.max_length >= prepared.task.val.y.shape[1]
