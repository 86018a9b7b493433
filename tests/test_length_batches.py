"""Training rows from a token store batched by length: every row once an epoch, per-batch
padding, token budgets, (seed, epoch) order, disjoint shards."""

from __future__ import annotations

import numpy as np
import pytest

from experiments.data.stored_split import StoredSplit
from experiments.data.token_store import StoreWriter, TokenStore
from experiments.data.vocab import END, START
from experiments.training.batches import LengthBatches, epoch_batches


def stored(tmp_path, rows=300, seed=0) -> StoredSplit:
    rng = np.random.default_rng(seed)
    writer = StoreWriter(tmp_path / "train", ("source", "target"))
    lengths = rng.integers(1, 40, rows)
    writer.append(
        {
            # each row's first id is its number, to recognise it in a batch
            "source": [[4 + i] + [5] * (n - 1) for i, n in enumerate(lengths)],
            # as in a translation, a target about as long as its source
            "target": [[6] * int(n + rng.integers(0, 3)) for n in lengths],
        }
    )
    writer.close()
    return StoredSplit(TokenStore(tmp_path / "train", ("source", "target")), "f" * 32)


def rows_of(batches, epoch) -> list[int]:
    return [int(r) for i in range(len(batches)) for r in batches.batch_rows(i, epoch)]


def test_every_row_is_in_one_batch_of_each_epoch_in_an_order_of_the_seed_and_epoch(tmp_path):
    split = stored(tmp_path)
    batches = LengthBatches(split, 32, seed=3)
    for epoch in (0, 1):
        assert sorted(rows_of(batches, epoch)) == list(range(len(split)))
    assert rows_of(batches, 0) != rows_of(batches, 1)
    assert rows_of(batches, 1) == rows_of(LengthBatches(split, 32, seed=3), 1)  # a resume
    assert rows_of(batches, 1) != rows_of(LengthBatches(split, 32, seed=4), 1)


def test_a_batch_is_padded_to_its_own_longest_row_and_feeds_teacher_forcing(tmp_path):
    split = stored(tmp_path)
    batches = epoch_batches(split, 32, seed=0)
    assert isinstance(batches, LengthBatches)
    sources, targets = split.lengths()
    global_padding = 1 - (sources.mean() + targets.mean()) / (sources.max() + targets.max())
    padding = []
    for i in range(len(batches)):
        (x, x_dec), y = batches[i]
        rows = batches.batch_rows(i)
        assert x.shape[1] == -(-sources[rows].max() // 4) * 4  # rounded up to 4
        assert y.shape[1] == -(-targets[rows].max() // 4) * 4
        np.testing.assert_array_equal(x[:, 0], rows + 4)  # the rows asked for, in order
        assert (x_dec[:, 0] == START).all()
        ends = (y == END).argmax(1)
        np.testing.assert_array_equal(ends, targets[rows] - 1)
        shifted = np.where(y[:, :-1] == END, 0, y[:, :-1])  # the decoder input is <s> + target
        np.testing.assert_array_equal(x_dec[:, 1:], shifted)
        padding.append(((x == 0).sum() + (y == 0).sum()) / (x.size + y.size))
    # sorted by length: far less padding than one width for the whole split (what batches of
    # random rows come close to)
    assert np.mean(padding) < 0.5 * global_padding


def test_a_token_budget_bounds_every_batch_with_its_padding(tmp_path):
    split = stored(tmp_path)
    batches = LengthBatches(split, 32, seed=0, batch_tokens=400, multiple=2)
    sizes = []
    for i in range(len(batches)):
        (x, _), y = batches[i]
        sizes.append(len(x))
        assert len(x) % 2 == 0
        assert len(x) * (x.shape[1] + y.shape[1]) <= 400 or len(x) == 2
    assert len(set(sizes)) > 2  # short rows make bigger batches
    assert sorted(set(rows_of(batches, 0))) == list(range(len(split)))


@pytest.mark.parametrize("count", [2, 3])
def test_processes_read_disjoint_parts_of_every_batch(tmp_path, count):
    split = stored(tmp_path, rows=301)
    parts = [LengthBatches(split, 24, seed=1, shard=(i, count)) for i in range(count)]
    seen = []
    for i in range(len(parts[0])):
        firsts = [p[i][0][0][:, 0] - 4 for p in parts]
        assert len({len(f) for f in firsts}) == 1
        seen += [int(r) for f in firsts for r in f]
    # every row once an epoch across the processes; a short last batch is filled up with
    # rows of its own to split evenly
    assert set(seen) == set(range(len(split)))
    assert len(seen) - len(split) < count


@pytest.mark.parametrize("longest", [30, 5000])  # a 16-bit key, and ranks of the pairs
def test_the_sort_key_orders_rows_by_target_then_source_length(longest):
    from experiments.training.batches import _length_key

    rng = np.random.default_rng(0)
    sources = rng.integers(0, longest, 2000).astype("int32")
    targets = rng.integers(0, longest, 2000).astype("int32")
    key = _length_key(sources, targets)
    assert key.dtype.itemsize <= 4
    order = np.argsort(key, kind="stable")
    np.testing.assert_array_equal(order, np.lexsort((sources, targets)))


def test_batches_of_other_widths_than_the_first_two_train_on_tensorflow(tmp_path):
    """Keras fixes a `PyDataset`'s shapes from its first two batches: on TensorFlow the feed
    goes to `fit` as a `tf.data` generator with every dimension unknown."""
    import keras

    from experiments.backends.tensorflow_backend import TensorFlowBackend

    writer = StoreWriter(tmp_path / "train", ("source", "target"))
    lengths = [3] * 90 + [10] * 10  # widths 4 and 12
    writer.append({"source": [[5] * n for n in lengths], "target": [[6] * n for n in lengths]})
    writer.close()
    split = StoredSplit(TokenStore(tmp_path / "train", ("source", "target")), "f" * 32)
    feed = LengthBatches(split, 8, seed=0)
    widths = [feed[i][0][0].shape[1] for i in range(len(feed))]
    assert widths[0] == widths[1] and set(widths[2:]) - {widths[0]}  # the case that failed
    data = TensorFlowBackend().fit_data(feed)
    for spec in keras.tree.flatten(data.element_spec):
        assert spec.shape.as_list() == [None, None]
    source = keras.Input((None,), dtype="int32")
    target = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(10, 4, mask_zero=True)
    summary = keras.layers.GlobalAveragePooling1D()(embedded(source))
    logits = keras.layers.Dense(10)(embedded(target) + summary[:, None, :])
    model = keras.Model([source, target], logits)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(data, epochs=2, shuffle=False, verbose=0)
    assert len(history.history["loss"]) == 2


def test_pooled_batches_are_sorted_within_a_pool_and_change_their_rows_each_epoch(tmp_path):
    split = stored(tmp_path)
    sources, targets = split.lengths()
    fixed = LengthBatches(split, 16, seed=2)
    pooled = LengthBatches(split, 16, seed=2, pool=4)
    assert len(pooled) == len(fixed)

    def kept_batchmates(batches):  # the mean share of a row's batchmates that stay with it
        mates = []
        for epoch in (0, 1):
            batch_of = np.empty(len(split), "int64")
            for i in range(len(batches)):
                batch_of[batches.batch_rows(i, epoch)] = i
            mates.append(batch_of)
        kept = [
            np.mean(mates[1][mates[0] == mates[0][row]] == mates[1][row])
            for row in range(len(split))
        ]
        return float(np.mean(kept))

    # sorted once, the fixed feed makes nearly the same batches every epoch (only rows of
    # equal lengths trade places); pools of shuffled rows make new ones
    assert kept_batchmates(fixed) > 0.8
    assert kept_batchmates(pooled) < 0.3
    for epoch in (0, 1):
        assert sorted(rows_of(pooled, epoch)) == list(range(len(split)))
        order, _ = pooled.plan(epoch)
        for start in range(0, len(order), 64):  # length order within each pool of 4 batches
            key = targets[order[start : start + 64]] * 100 + sources[order[start : start + 64]]
            assert (np.diff(key) >= 0).all()
        assert rows_of(pooled, epoch) == rows_of(LengthBatches(split, 16, seed=2, pool=4), epoch)
    padding = [b[1].size for b in (pooled[i] for i in range(len(pooled)))]
    assert sum(padding) < len(split) * targets.max()  # padded per batch, not to the longest


def test_a_pool_needs_a_fixed_batch_size(tmp_path):
    split = stored(tmp_path)
    for options in ({"pool": 0}, {"pool": 4, "batch_tokens": 400}):
        with pytest.raises(ValueError, match=r"pool .*Received: pool="):
            LengthBatches(split, 16, seed=0, **options)


def test_the_config_refuses_a_pool_of_token_budgets():
    from experiments import config as config_lib
    from experiments.errors import ConfigError

    with pytest.raises(ConfigError, match=r"train.batch_pool .*batch_pool=4, batch_tokens=512"):
        config_lib.validate(
            {"task": {"name": "reverse"}, "train": {"batch_pool": 4, "batch_tokens": 512}}
        )
    assert config_lib.validate({"task": {"name": "reverse"}, "train": {"batch_pool": 4}})


@pytest.mark.parametrize("jit_compile", [False, True])
def test_the_runner_pads_a_batch_to_its_longest_row_unless_each_shape_is_compiled(
    tmp_path, jit_compile
):
    """Where the training step is compiled for each shape (XLA: JAX always, TensorFlow with
    `train.jit_compile`) a bucketed batch is padded to a multiple of 16, so that few shapes
    are compiled; elsewhere to its longest row: any more padding is only more steps."""
    from experiments import backends
    from experiments import config as config_lib
    from experiments.training import run

    cfg = config_lib.validate({"task": {"name": "reverse"}, "train": {"jit_compile": jit_compile}})
    compiled = backends.current().jit_compile(jit_compile)
    split = stored(tmp_path)
    sources, _ = split.lengths()
    batches = epoch_batches(split, 32, seed=0, **run.feed_options(cfg))
    widths = {batches[i][0][0].shape[1] for i in range(len(batches))}
    longest = {int(sources[batches.batch_rows(i)].max()) for i in range(len(batches))}
    assert widths == ({-(-n // 16) * 16 for n in longest} if compiled else longest)
    assert len(longest) > len({-(-n // 16) * 16 for n in longest})  # the two differ here
