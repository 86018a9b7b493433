"""`Reservoir`: the corpora's one-pass sample of training rows."""

import numpy as np

from experiments.data.reservoir import Reservoir


def _sample(stream, size, seed):
    reservoir = Reservoir(size, seed)
    for item in stream:
        reservoir.offer(item)
    return reservoir


def test_a_short_stream_is_kept_whole_and_a_long_one_bounded_and_reproducible():
    assert _sample(range(5), 10, 0).items == [0, 1, 2, 3, 4]
    long = _sample(range(1000), 10, 3)
    assert len(long.items) == 10 and long.seen == 1000
    assert len(set(long.items)) == 10 and set(long.items) <= set(range(1000))
    assert long.items == _sample(range(1000), 10, 3).items
    assert long.items != _sample(range(1000), 10, 4).items


def test_every_item_is_equally_likely_to_be_kept():
    """Over 2,000 seeds, each of 20 items is kept about 5/20 of the time (algorithm R):
    keeping the first ones, or the last ones, more often fails."""
    counts = np.zeros(20)
    for seed in range(2000):
        counts[_sample(range(20), 5, seed).items] += 1
    assert np.all(np.abs(counts / 2000 - 0.25) < 0.04), counts / 2000
