"""The corpus benchmarks: a generated file of pairs of growing size through the pairs
task's data path, each in a fresh process watched from outside (`bench/corpus_probe.py`).

Generated pairs, not real text: sentences of 1-60 words (Poisson, mean 11) drawn by Zipf's
law from 20,000 random letter strings, each target the source's words mapped one to one
onto another 20,000 strings and reversed (about 140 bytes a row: ten million rows are a
1.4 GB file). The data path is the `pairs` task's: two streaming passes, SentencePiece on
the default sample, the token store, a length-bucketed first batch and one training step of
a tiny model.

`corpus_memory`: the peak memory (resident set, and anonymous memory: the store's mapped
pages are file-backed) of the larger file over the smaller one's (goal <= 1.2: constant
memory); `corpus_first_step`: the larger file's seconds from the process's start to its
first training step over the 5-minute budget (goal <= 1); the times of the tokenizer's
sample and of a second run from the cache ride along.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from experiments.bench.cases.common import Options

FIRST_STEP_BUDGET_S = 300.0
CACHED_FIRST_STEP_BUDGET_S = 15.0
_measured: dict = {}  # one measurement serves both benchmarks of a suite run


def write_pairs(path: Path, rows: int, seed: int = 0) -> None:
    """`rows` generated pairs as a TSV file with a header (see the module docstring)."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    size = 20_000
    words = ["".join(rng.choice(letters, n)) for n in rng.integers(2, 9, size)]
    other = ["".join(rng.choice(letters, n)) for n in rng.integers(2, 10, size)]
    zipf = 1.0 / np.arange(1, size + 1)
    zipf /= zipf.sum()
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("source\ttarget\n")
        for start in range(0, rows, 100_000):
            count = min(100_000, rows - start)
            lengths = np.clip(rng.poisson(11, count), 1, 60)
            ids = rng.choice(size, int(lengths.sum()), p=zipf)
            lines, at = [], 0
            for n in lengths:
                row = ids[at : at + n]
                at += n
                source = " ".join(words[i] for i in row)
                lines.append(source + "\t" + " ".join(other[i] for i in row[::-1]))
            handle.write("\n".join(lines) + "\n")


def probe(path: Path, cache: Path, sample: int) -> dict:
    """One fresh process through the data path to its first step, its memory sampled every
    0.1 s from outside (peak `RssAnon`, peak `VmRSS`)."""
    config = {
        "task": {"name": "pairs", "path": str(path), "tokenizer_sample": sample},
        "model": {"units": 16, "embedding_dim": 16},
        "train": {"batch_size": 64, "epochs": 1},
        "tracking": {"log_model": False, "system_metrics": False},
    }
    env = {**os.environ, "ATTN_RNN_DATA_CACHE": str(cache), "TF_CPP_MIN_LOG_LEVEL": "3"}
    command = [sys.executable, "-m", "experiments.bench.corpus_probe", json.dumps(config)]
    started = time.perf_counter()
    child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peaks = {"RssAnon": 0, "VmRSS": 0}

    def watch():
        while child.poll() is None:
            for field, value in _status(child.pid).items():
                peaks[field] = max(peaks[field], value)
            time.sleep(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    out, err = child.communicate()
    watcher.join()
    if child.returncode:
        raise RuntimeError(f"the data path failed: {err.decode()[-2000:]}")
    result = json.loads(out.decode().strip().splitlines()[-1])
    result.update(
        wall_s=time.perf_counter() - started,
        peak_rss_anon_mb=peaks["RssAnon"] / 1024,
        peak_rss_mb=max(peaks["VmRSS"], result["vmhwm_kb"]) / 1024,
        phases=[line for line in err.decode().splitlines() if " in " in line or "cached" in line],
    )
    return result


def _status(pid: int) -> dict[str, int]:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return {}
    out = {}
    for line in lines:
        name, _, value = line.partition(":")
        if name in ("RssAnon", "VmRSS"):
            out[name] = int(value.split()[0])
    return out


def measure(options: Options) -> dict:
    """The smaller and the larger file through the data path, then the larger again from the
    cache (once per options)."""
    size = options.sizes["corpus"]
    key = (options.profile, options.seed)
    if key in _measured:
        return _measured[key]
    with tempfile.TemporaryDirectory(prefix="attn-rnn-corpus-") as tmp:
        runs = {}
        for rows in (size["small"], size["large"]):
            path = Path(tmp) / f"pairs_{rows}.tsv"
            write_pairs(path, rows, options.seed)
            runs[rows] = probe(path, Path(tmp) / "cache", size["sample"])
            if rows == size["large"]:
                runs["cached"] = probe(path, Path(tmp) / "cache", size["sample"])
                runs["file_mb"] = path.stat().st_size / 2**20
            path.unlink()
    _measured[key] = runs
    return runs


def _one(ratio: float, what: str) -> dict:
    """The spread of a single measurement: the ratio itself."""
    return {"iqr": [ratio, ratio], "min": ratio, "max": ratio, "what": what}


def _shapes(options: Options, runs: dict) -> dict:
    size = options.sizes["corpus"]
    return {**size, "large_file_mb": round(runs["file_mb"], 1)}


def corpus_memory(options: Options) -> dict:
    """Peak memory of the larger file's data path over the smaller one's (anonymous memory:
    the bound holds on it; the resident set beside it)."""
    runs = measure(options)
    size = options.sizes["corpus"]
    small, large = runs[size["small"]], runs[size["large"]]
    ratio = large["peak_rss_anon_mb"] / small["peak_rss_anon_mb"]
    return {
        "ratio": ratio,
        "spread": _one(ratio, "one measurement of each file"),
        "project_s": large["peak_rss_anon_mb"],
        "peer_s": small["peak_rss_anon_mb"],
        "shapes": _shapes(options, runs),
        "project": f"peak anonymous memory (MB), {size['large']:,} rows",
        "peer": f"the same, {size['small']:,} rows",
        "peak_rss_mb": {"small": small["peak_rss_mb"], "large": large["peak_rss_mb"]},
        "peak_rss_anon_mb": {
            "small": small["peak_rss_anon_mb"],
            "large": large["peak_rss_anon_mb"],
        },
        "runs": runs,
    }


def corpus_first_step(options: Options) -> dict:
    """Seconds from the process's start to the first training step on the larger file, over
    the budget; a second run on the same file (the cache) rides along with its own budget."""
    runs = measure(options)
    size = options.sizes["corpus"]
    large, cached = runs[size["large"]], runs["cached"]
    ratio = large["first_step_s"] / FIRST_STEP_BUDGET_S
    return {
        "ratio": ratio,
        "spread": _one(ratio, "one measurement"),
        "project_s": large["first_step_s"],
        "peer_s": FIRST_STEP_BUDGET_S,
        "shapes": _shapes(options, runs),
        "project": f"start to first training step, {size['large']:,} rows",
        "peer": f"the {FIRST_STEP_BUDGET_S:.0f} s budget",
        "cached_first_step_s": cached["first_step_s"],
        "cached_within_budget": cached["first_step_s"] <= CACHED_FIRST_STEP_BUDGET_S,
        "phases": large["phases"],
    }


def length_buckets_speedup(options: Options) -> dict:
    """Training time to the same validation loss with length-bucketed batches
    (`LengthBatches`) against the same rows padded alike to the split's longest
    (`EpochBatches`, how the training split was fed before), on the real pairs that ship
    with the `pairs` config (subword units): the same model and seed each, fitted side by
    side in one process, a quarter of an epoch of each in turn (`CHECKS_PER_EPOCH`), so
    that a stretch in which the machine runs slower slows both feeds, not the one fitted
    then.

    The padded feed trains `epochs` epochs and sets the loss to reach (its validation loss
    then); the bucketed feed trains (at most twice as many epochs) until its loss is within
    2 % of that, its validation loss measured after every quarter of an epoch, so that the
    time to the loss is not rounded up to a whole epoch.
    The ratio is the padded time over the bucketed time to that point (0 where the bucketed
    feed never gets there); the same ratio at whole epochs only, with each side's parts at
    their median length (`ratio_median_parts`: without the parts something else slowed)
    and tokens per second over the same epochs ride along. Only `fit`'s seconds count, not
    the evaluations, and each feed's training step is traced before the clock starts, as
    `fit` will call it (a bucketed feed's batches vary in shape: one trace for them all).

    With `--pairs FILE` (a larger real sample, e.g. tools/translation_pairs.py's) it is
    measured on that file too; the ratio is then the smaller of the two."""
    files = {"shipped": _shipped_pairs()}
    if options.pairs_file:
        files["pairs_file"] = Path(options.pairs_file)
    results = {name: _buckets_on(path, options) for name, path in files.items()}
    ratio = min(result["ratio"] for result in results.values())
    shipped = results["shipped"]
    if len(results) == 1:
        return shipped
    return {
        **shipped,
        "ratio": ratio,
        "spread": _one(ratio, "one fit of each, the smaller of the files' ratios"),
        "project": f"{shipped['project']} (shipped pairs and {options.pairs_file})",
        "files": {name: {**result, "path": str(files[name])} for name, result in results.items()},
    }


def bucket_task(path: Path | str, options: Options):
    """`(cfg, task)`: the pairs task on `path` at the `buckets` shapes of `options`' profile,
    its corpus cached in a temporary folder (not the user's cache)."""
    from experiments import config as config_lib  # noqa: PLC0415 - the runner's heavy parts
    from experiments.training import run  # noqa: PLC0415

    size = options.sizes["buckets"]
    with tempfile.TemporaryDirectory(prefix="attn-rnn-buckets-") as cache:
        previous = os.environ.get("ATTN_RNN_DATA_CACHE")
        os.environ["ATTN_RNN_DATA_CACHE"] = cache
        try:
            cfg = config_lib.validate(
                {
                    "task": {
                        "name": "pairs",
                        "path": str(path),
                        "vocabulary_size": size["vocabulary_size"],
                    },
                    "model": {"units": size["units"], "embedding_dim": size["units"]},
                    "train": {"batch_size": size["batch_size"], "seed": options.seed},
                }
            )
            prepared = run.validate(cfg)
        finally:
            if previous is None:
                os.environ.pop("ATTN_RNN_DATA_CACHE")
            else:
                os.environ["ATTN_RNN_DATA_CACHE"] = previous
    return prepared.cfg, prepared.task


def _buckets_on(path: Path, options: Options) -> dict:
    """`length_buckets_speedup` on the pairs file `path`."""
    from experiments.training import run  # noqa: PLC0415
    from experiments.training.batches import EpochBatches, LengthBatches  # noqa: PLC0415

    cfg, task = bucket_task(path, options)
    size = options.sizes["buckets"]
    dense = task.train.take(slice(None))  # every row padded to the split's longest
    epochs = size["epochs"]
    feed_options = run.feed_options(cfg)  # as the runner feeds it (the backend's padding)
    padded, buckets = (
        Fitting(task, cfg, feed, options, CHECKS_PER_EPOCH)
        for feed in (
            EpochBatches(dense, cfg.train.batch_size, cfg.train.seed),
            LengthBatches(task.train, cfg.train.batch_size, cfg.train.seed, **feed_options),
        )
    )
    while padded.done < epochs:  # side by side, so that a slower minute slows both
        padded.fit_part()
        buckets.fit_part()
    target = padded.losses[-1] * (1 + SAME_LOSS)
    while buckets.done < 2 * epochs and not buckets.reached(target):
        buckets.fit_part()
    padded, buckets = padded.result(), buckets.result()
    reached = [i for i, loss in enumerate(buckets["val_loss"]) if loss <= target]
    whole = [i for i in reached if buckets["epochs"][i] == int(buckets["epochs"][i])]
    seconds_padded = padded["seconds"][-1]
    seconds_buckets = buckets["seconds"][reached[0] if reached else -1]
    ratio = seconds_padded / seconds_buckets if reached else 0.0
    tokens = task.kind.tokens_per_epoch(task.train)
    same = min(
        (i for i, done in enumerate(buckets["epochs"]) if done >= epochs),
        default=len(buckets["epochs"]) - 1,
    )
    done = buckets["epochs"][same]
    return {
        "ratio": ratio,
        "spread": _one(ratio, "one fit of each"),
        "project_s": seconds_buckets,
        "peer_s": seconds_padded,
        "shapes": {
            **size,
            "train_rows": len(task.train),
            "padded_width": dense.x.shape[1],
            "buckets_pad_to": feed_options["pad_to"],
        },
        "project": "LengthBatches (rows of similar length, padded per batch), to the same loss",
        "peer": f"EpochBatches over the split padded to its longest row, {epochs} epochs",
        "loss_to_reach": target,
        "epochs_to_reach": buckets["epochs"][reached[0]] if reached else None,
        # measured at the ends of epochs only, as before 2026-12-06
        "ratio_whole_epochs": seconds_padded / buckets["seconds"][whole[0]] if whole else 0.0,
        # each side's time as its parts (epochs, quarters) at their median length: what the
        # ratio is without a part that something else slowed (until 2026-12-06, on
        # TensorFlow, the end of a part waiting for tf.data's autotuning thread)
        "ratio_median_parts": (
            _steady_seconds(padded["seconds"])
            / _steady_seconds(buckets["seconds"][: reached[0] + 1])
            if reached
            else 0.0
        ),
        "val_loss": {"padded": padded["val_loss"], "buckets": buckets["val_loss"]},
        "epochs": {"padded": padded["epochs"], "buckets": buckets["epochs"]},
        "seconds": {"padded": padded["seconds"], "buckets": buckets["seconds"]},
        "tokens_per_second_same_epochs": {
            "padded": tokens * epochs / seconds_padded,
            "buckets": tokens * done / buckets["seconds"][same],
        },
    }


def _steady_seconds(cumulative: list[float]) -> float:
    """Parts' cumulative seconds as their number times their median length."""
    return len(cumulative) * float(np.median(np.diff(cumulative, prepend=0.0)))


# The bucketed feed's validation loss counts as the padded feed's within this fraction.
SAME_LOSS = 0.02
# How often in an epoch the bucketed feed's validation loss is measured.
CHECKS_PER_EPOCH = 4


def fit_epochs(
    task, cfg, feed, epochs: int, options: Options, stop_below=None, checks_per_epoch: int = 1
) -> dict:
    """`Fitting.result()` of `epochs` epochs on `feed`, stopped at the end of the epoch in
    which a validation loss is at most `stop_below`."""
    fitting = Fitting(task, cfg, feed, options, checks_per_epoch)
    while fitting.done < epochs and not fitting.reached(stop_below):
        fitting.fit_part()
    return fitting.result()


class Fitting:
    """A model of `task` fitted on `feed` (its `epoch` set as the runner's `EpochClock`
    does) a part of an epoch at a time (`checks_per_epoch` parts), its validation loss
    measured after each, so that two feeds can be fitted side by side, a part of each in
    turn. One batch is fitted before the clock starts, through the same `fit_data` as the
    rest, so that the training step `fit` calls is traced then (one more step for every
    feed); only `fit`'s seconds count, not the evaluations."""

    def __init__(self, task, cfg, feed, options: Options, checks_per_epoch: int = 1):
        import keras  # noqa: PLC0415

        from experiments import backends  # noqa: PLC0415
        from experiments.training import run  # noqa: PLC0415

        keras.utils.set_random_seed(options.seed)
        self.model = task.kind.build_model(cfg, task)
        run.compile_model(self.model, cfg, task)
        self.task, self.feed, self.checks_per_epoch = task, feed, checks_per_epoch
        self.fit_data = backends.current().fit_data
        self._fit(0, 1)
        self.parts = np.linspace(0, len(feed), checks_per_epoch + 1).round().astype(int)
        self.seconds, self.epochs, self.losses, self.elapsed = [], [], [], 0.0

    @property
    def done(self) -> float:
        """Epochs fitted so far (1.25 after the first quarter of the second)."""
        return self.epochs[-1] if self.epochs else 0.0

    def reached(self, loss) -> bool:
        """Whether an epoch has ended since a validation loss was at most `loss` (None:
        never)."""
        if loss is None or not self.losses:
            return False
        return self.done == int(self.done) and min(self.losses) <= loss

    def fit_part(self) -> None:
        """Fits the next part of an epoch and measures the validation loss after it."""
        epoch, part = divmod(len(self.epochs), self.checks_per_epoch)
        self.feed.epoch = epoch
        started = time.perf_counter()
        self._fit(self.parts[part], self.parts[part + 1])
        self.elapsed += time.perf_counter() - started
        val = self.task.val
        self.losses.append(float(self.model.evaluate(val.inputs, val.y, batch_size=64, verbose=0)))
        self.seconds.append(self.elapsed)
        self.epochs.append(epoch + (part + 1) / self.checks_per_epoch)

    def _fit(self, start: int, stop: int) -> None:
        data = self.fit_data(epoch_part(self.feed, start, stop))
        self.model.fit(data, epochs=1, shuffle=False, verbose=0)

    def result(self) -> dict:
        """Cumulative `fit` seconds, the epochs done and the validation losses, after each
        part."""
        return {"seconds": self.seconds, "epochs": self.epochs, "val_loss": self.losses}


def epoch_part(feed, start: int, stop: int):
    """Batches `start` to `stop` of `feed`'s current epoch, as a feed of their own (a
    `keras.utils.PyDataset`; varying in shape where `feed`'s batches do)."""
    import keras  # noqa: PLC0415

    class Part(keras.utils.PyDataset):
        varying_shapes = getattr(feed, "varying_shapes", False)

        def __len__(self) -> int:
            return stop - start

        def __getitem__(self, index: int):
            return feed[start + index]

    return Part()


def _shipped_pairs() -> Path:
    from experiments import ready_configs  # noqa: PLC0415

    return ready_configs.directory() / "data" / "software_en_fr.tsv"
