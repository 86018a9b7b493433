"""The token store: ragged rows written a chunk at a time, read back memory-mapped."""

from __future__ import annotations

import numpy as np
import pytest

from experiments.data.token_store import StoreWriter, TokenStore


def test_rows_come_back_as_written_without_padding(tmp_path):
    rng = np.random.default_rng(0)
    rows = {f: [list(rng.integers(4, 100, rng.integers(0, 9))) for _ in range(50)] for f in "ab"}
    writer = StoreWriter(tmp_path / "s", ("a", "b"))
    writer.append({f: rows[f][:20] for f in "ab"})
    writer.append({f: rows[f][20:] for f in "ab"})
    writer.close()
    store = TokenStore(tmp_path / "s", ("a", "b"))
    assert len(store) == 50 and sorted(p.name for p in (tmp_path / "s").iterdir()) == [
        "a.npy",
        "a_offsets.npy",
        "b.npy",
        "b_offsets.npy",
    ]
    for f in "ab":
        np.testing.assert_array_equal(store.lengths(f), [len(r) for r in rows[f]])
        assert store.tokens(f) == sum(len(r) for r in rows[f])  # no padding on disk
        picked = [7, 0, 49, 7]
        assert [r.tolist() for r in store.rows(f, picked)] == [rows[f][i] for i in picked]
    assert isinstance(np.load(tmp_path / "s" / "a.npy", mmap_mode="r"), np.memmap)


def test_a_chunk_with_uneven_fields_is_refused(tmp_path):
    writer = StoreWriter(tmp_path / "s", ("a", "b"))
    with pytest.raises(ValueError, match="the same number of rows"):
        writer.append({"a": [[1]], "b": [[1], [2]]})
    writer.abort()


def test_rows_past_a_limit_are_cut_and_counted(tmp_path):
    writer = StoreWriter(tmp_path / "s", ("a", "b"))
    cut = writer.append({"a": [[1, 2, 3, 4], [5], [6, 7, 8]], "b": [[9], [10, 11], []]}, {"a": 2})
    writer.close()
    assert cut == {"a": 2, "b": 0}
    store = TokenStore(tmp_path / "s", ("a", "b"))
    assert [r.tolist() for r in store.rows("a", [0, 1, 2])] == [[1, 2], [5], [6, 7]]
    assert [r.tolist() for r in store.rows("b", [0, 1, 2])] == [[9], [10, 11], []]
