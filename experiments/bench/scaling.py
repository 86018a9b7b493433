"""Scaling curves: step time against sequence length, and AttentionPooling's peak memory.

Each curve times a forward + backward step (one `tf.function`, as the
benchmarks) at every length and fits the exponent `k` of `time ~ T^k` on
the longer half of the lengths, where fixed per-call costs matter least:
about 1 for linear, 2 for quadratic.

Peak memory: where TensorFlow pools its CPU memory (the BFC allocator, which
`python -m experiments` chooses: `experiments.cpu_allocator`) the curve reads the
allocator's own peak above what it held before the step
(`tf.config.experimental.get_memory_info`, reset before each point). TensorFlow's
default CPU allocator keeps no statistics (`get_memory_info('CPU:0')` raises); there
the curve reports the process's peak resident set size (Linux `VmHWM`, reset before
each point through `/proc/self/clear_refs`) above the resident size before the step.
Either is reported next to the analytic size of the tensors the step keeps for the
backward pass.
"""

from __future__ import annotations

import ctypes
import math
import time

import keras
import matplotlib
import numpy as np
import tensorflow as tf
from keras import ops

from experiments.bench import timing
from experiments.bench.cases.common import Options, compiled_step, mean_square
from keras_attn_rnn.layers import AttentionDecoder, AttentionPooling, SequenceAttention

LENGTHS = {
    "full": [64, 128, 256, 512, 1024, 2048],
    "quick": [64, 128, 256],
    "tiny": [8, 16],
}
SHAPES = {
    "full": dict(pool_batch=16, pool_dim=128, attn_batch=4, attn_dim=64, window=16,
                 dec_batch=8, dec_units=64, dec_source=50),
    "quick": dict(pool_batch=8, pool_dim=64, attn_batch=2, attn_dim=32, window=16,
                  dec_batch=4, dec_units=32, dec_source=20),
    "tiny": dict(pool_batch=2, pool_dim=8, attn_batch=1, attn_dim=8, window=4,
                 dec_batch=2, dec_units=8, dec_source=5),
}  # fmt: skip
REPEATS = {"full": 3, "quick": 2, "tiny": 1}

CURVES = {
    "attention_pooling": "linear",
    "sequence_attention_full": "quadratic",
    "sequence_attention_window": "linear",
    "attention_decoder": "linear",
}


def exponent(lengths: list[int], seconds: list[float]) -> float | None:
    """Least-squares slope of log(seconds) on log(T) over the longer half of the points."""
    points = [(t, s) for t, s in zip(lengths, seconds) if s and s > 0]
    if len(points) < 2:
        return None
    points = points[len(points) // 2 - (1 if len(points) % 2 == 0 else 0) :]
    if len(points) < 2:
        return None
    x = np.log([p[0] for p in points])
    y = np.log([p[1] for p in points])
    return float(np.polyfit(x, y, 1)[0])


def _inputs(shape, seed=0):
    return ops.convert_to_tensor(np.random.default_rng(seed).standard_normal(shape), "float32")


def _step_factory(name: str, sizes: dict, options: Options):
    """`make(T) -> step` for one curve."""
    if name == "attention_pooling":
        layer = AttentionPooling()

        def make(t):
            x = _inputs((sizes["pool_batch"], t, sizes["pool_dim"]))
            return compiled_step(
                lambda: mean_square(layer(x)),
                lambda: layer.trainable_variables,
                options.jit_compile,
                watch=(x,),
            )

        return make, {"batch": sizes["pool_batch"], "dim": sizes["pool_dim"]}
    if name.startswith("sequence_attention"):
        window = sizes["window"] if name.endswith("window") else None
        layer = SequenceAttention(score="dot", window=window)

        def make(t):
            x = _inputs((sizes["attn_batch"], t, sizes["attn_dim"]))
            return compiled_step(
                lambda: mean_square(layer([x, x], use_causal_mask=True)),
                lambda: layer.trainable_variables,
                options.jit_compile,
                watch=(x,),
            )

        return make, {
            "batch": sizes["attn_batch"],
            "dim": sizes["attn_dim"],
            "score": "dot",
            "causal": True,
            "window": window,
        }
    units = sizes["dec_units"]
    decoder = AttentionDecoder(
        keras.layers.LSTMCell(units), score="additive", units=units, attention_layer_size=units
    )
    memory = _inputs((sizes["dec_batch"], sizes["dec_source"], units), seed=1)

    def make(t):
        x = _inputs((sizes["dec_batch"], t, units))
        return compiled_step(
            lambda: mean_square(decoder([x, memory])),
            lambda: decoder.trainable_variables,
            options.jit_compile,
            watch=(x,),
        )

    return make, {
        "batch": sizes["dec_batch"],
        "units": units,
        "source_len": sizes["dec_source"],
        "cell": "LSTMCell",
        "score": "additive",
    }


def step_time_curve(name: str, options: Options) -> dict:
    """Median seconds of a forward + backward step at each length."""
    lengths = LENGTHS[options.profile]
    make, shapes = _step_factory(name, SHAPES[options.profile], options)
    seconds = []
    for t in lengths:
        step = make(t)
        seconds.append(timing.median_time(step, REPEATS[options.profile], warmup=1))
    k = exponent(lengths, seconds)
    return {
        "T": lengths,
        "seconds": seconds,
        "exponent": k,
        "expected": CURVES[name],
        "looks": _looks(k),
        "shapes": shapes,
        "what": "forward + backward, median seconds per step",
    }


def _looks(k: float | None) -> str | None:
    if k is None:
        return None
    if k < 1.5:
        return "linear"
    return "quadratic" if k < 2.5 else "worse than quadratic"


def pooling_memory_curve(options: Options) -> dict:
    """Peak memory of an AttentionPooling forward + backward step at each length."""
    lengths = LENGTHS[options.profile]
    sizes = SHAPES[options.profile]
    make, shapes = _step_factory("attention_pooling", sizes, options)
    if _allocator_keeps_stats():
        source, peak_above_start = "allocator", _allocator_peak_above_start
    elif timing.rss_bytes("VmHWM") is not None and timing.peak_rss_reset():
        source, peak_above_start = "rss", _rss_peak_above_start
        # Large blocks straight from mmap and back to the OS on free: otherwise glibc keeps
        # freed tensors in its heap and a warm step's peak never rises above the resident size.
        _fixed_mmap_threshold(128 * 1024)
    else:
        return {"skipped": "no allocator statistics and no /proc/self peak-RSS accounting"}
    b, d = sizes["pool_batch"], sizes["pool_dim"]
    measured, analytic = [], []
    for t in lengths:
        step = make(t)
        step()  # trace and warm: the measured call allocates only the step's tensors
        measured.append(peak_above_start(step))
        # kept for backward (float32): input, W h + b, tanh(.), scores, weights; grads alike
        analytic.append(4 * b * t * (3 * d + 2) * 2)
    note = None
    if not any(measured):
        note = (
            "no growth seen: the allocator keeps freed blocks resident, so peak RSS cannot "
            "show a warm step's peak here; read analytic_bytes"
        )
    method = {
        "allocator": "TensorFlow's CPU allocator's peak (get_memory_info, its statistics "
        "reset before the step) minus what it held right before one warm forward + backward "
        "step",
        "rss": "peak RSS (VmHWM after a reset via /proc/self/clear_refs) minus RSS right "
        "before one warm forward + backward step, with glibc's mmap threshold fixed at "
        "128 KiB so freed tensors leave the process (TensorFlow's default CPU allocator "
        "keeps no statistics)",
    }[source]
    return {
        "T": lengths,
        "source": source,
        "peak_note": note,
        "peak_bytes_above_start": measured,
        "analytic_bytes": analytic,
        "exponent_measured": exponent(lengths, [m or math.nan for m in measured]),
        "exponent_analytic": exponent(lengths, analytic),
        "expected": "linear",
        "shapes": shapes,
        "method": method + ". analytic = 2 x 4 bytes x B x T x (3D + 2) (activations kept "
        "for backward and their gradients)",
    }


def _allocator_keeps_stats() -> bool:
    """Whether TensorFlow's CPU allocator keeps statistics (the BFC allocator does)."""
    try:
        tf.config.experimental.get_memory_info("CPU:0")
    except ValueError:  # "Allocator stats not available": the default allocator
        return False
    return True


def _allocator_peak_above_start(step) -> int:
    tf.config.experimental.reset_memory_stats("CPU:0")
    before = tf.config.experimental.get_memory_info("CPU:0")["current"]
    step()
    return max(0, tf.config.experimental.get_memory_info("CPU:0")["peak"] - before)


def _rss_peak_above_start(step) -> int:
    before = timing.rss_bytes("VmRSS")
    timing.peak_rss_reset()
    step()
    return max(0, timing.rss_bytes("VmHWM") - before)


def _fixed_mmap_threshold(size: int) -> bool:
    """glibc `mallopt(M_MMAP_THRESHOLD, size)`; False where that is not glibc."""
    try:
        return bool(ctypes.CDLL("libc.so.6").mallopt(-3, size))  # -3: M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        return False


def run_curves(options: Options, only: set[str] | None = None) -> dict:
    """Every curve (or those named in `only`), plus the memory curve."""
    out = {}
    for name in CURVES:
        if only is None or name in only or "scaling" in only:
            started = time.perf_counter()
            out[name] = step_time_curve(name, options)
            out[name]["wall_s"] = round(time.perf_counter() - started, 1)
    if only is None or "pooling_memory" in only or "scaling" in only:
        started = time.perf_counter()
        out["attention_pooling_memory"] = pooling_memory_curve(options)
        out["attention_pooling_memory"]["wall_s"] = round(time.perf_counter() - started, 1)
    return out


def figure(curves: dict):
    """A matplotlib Figure: step time vs T (log-log) and pooling peak memory vs T."""
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt  # after the backend choice: pyplot picks one on import

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name in CURVES:
        curve = curves.get(name) or {}
        if "seconds" not in curve:
            continue
        k = curve.get("exponent")
        label = f"{name} (k={k:.2f}, expected {curve['expected']})" if k else name
        left.loglog(curve["T"], curve["seconds"], marker="o", label=label)
    left.set_xlabel("sequence length T")
    left.set_ylabel("seconds per forward + backward step")
    left.set_title("step time vs T (time ~ T^k)")
    left.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=7)
    memory = curves.get("attention_pooling_memory") or {}
    if "T" in memory:
        right.plot(
            memory["T"],
            np.asarray(memory["peak_bytes_above_start"]) / 2**20,
            marker="o",
            label=f"peak above start (measured: {memory['source']})",
        )
        right.plot(
            memory["T"],
            np.asarray(memory["analytic_bytes"]) / 2**20,
            marker="x",
            linestyle="--",
            label="analytic tensors",
        )
        right.legend(fontsize=7)
    right.set_xlabel("sequence length T")
    right.set_ylabel("MiB")
    right.set_title("AttentionPooling peak memory vs T")
    right.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig
