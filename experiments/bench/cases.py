"""The eight side-by-side benchmarks: the project against its peer on the same shapes.

Every benchmark returns the fields of `timing.paired` plus its `shapes`, what
`project` and `peer` are, and anything it measured on the side. A benchmark
whose code is not there yet raises `Skip` with the reason.

Training steps are compiled the same way on both sides: one `tf.function`
(with `jit_compile` per `--jit-compile`) holding forward, backward and, for
model steps, an Adam update — the same step the tfa peer script times.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from experiments.bench import timing

GOALS = {
    "pooling_overhead": "<=1.10",
    "causal_dot_vs_keras": "<=1.05",
    "additive_vs_keras": "<=1.00",
    "decoder_vs_tfa": ">=1.3",
    "luong_parallel_speedup": ">=2",
    "generation_cache_speedup": ">=10",
    "beam4_cost": "<=5",
    "tracking_overhead": "<=1.05",
}

# Shapes and repeat counts per profile. "full" has the shapes of the table.
PROFILES = {
    "full": {
        "pooling_overhead": dict(batch=64, time=200, units=128, embedding_dim=128, vocab=5000),
        "causal_dot_vs_keras": dict(batch=32, time=256, dim=128),
        "additive_vs_keras": dict(batch=64, query_len=30, value_len=50, dim=256, units=256),
        "decoder": dict(batch=64, source_len=50, target_len=30, units=256, vocab=1000),
        "generation": dict(
            batch=8, tokens=256, prompt_len=8, units=256, embedding_dim=64, vocab=1000
        ),
        "tracking": dict(config="demo", set=[]),
        "repeats": dict(
            fast=30, step=10, slow=3, generation=3, tfa_rounds=2, warmup=2, tracking_epochs=3
        ),
    },
    "quick": {
        "pooling_overhead": dict(batch=32, time=100, units=64, embedding_dim=64, vocab=2000),
        "causal_dot_vs_keras": dict(batch=16, time=128, dim=64),
        "additive_vs_keras": dict(batch=16, query_len=20, value_len=30, dim=64, units=64),
        "decoder": dict(batch=16, source_len=20, target_len=10, units=64, vocab=200),
        "generation": dict(batch=4, tokens=48, prompt_len=4, units=64, embedding_dim=32, vocab=200),
        "tracking": dict(config="needle", set=["task.num_examples=1000"]),
        "repeats": dict(
            fast=8, step=5, slow=2, generation=2, tfa_rounds=1, warmup=1, tracking_epochs=2
        ),
    },
    "tiny": {
        "pooling_overhead": dict(batch=4, time=12, units=8, embedding_dim=8, vocab=50),
        "causal_dot_vs_keras": dict(batch=2, time=12, dim=8),
        "additive_vs_keras": dict(batch=2, query_len=5, value_len=7, dim=8, units=8),
        "decoder": dict(batch=4, source_len=7, target_len=5, units=16, vocab=50),
        "generation": dict(batch=2, tokens=6, prompt_len=2, units=8, embedding_dim=8, vocab=30),
        "tracking": dict(
            config="needle",
            set=[
                "task.num_examples=64",
                "task.max_length=12",
                "task.num_probes=1",
                "model.units=8",
                "model.embedding_dim=8",
                "train.eval_examples=16",
                "train.run_eagerly=true",  # no tracing: the test checks the schema only
            ],
        ),
        "repeats": dict(
            fast=2, step=2, slow=1, generation=1, tfa_rounds=1, warmup=0, tracking_epochs=1
        ),
    },
}


class Skip(Exception):
    """The benchmark cannot run here; the message says why."""


@dataclass
class Options:
    """What every benchmark needs to know about the run."""

    profile: str = "full"
    jit_compile: bool = False
    tfa_python: str | None = None
    seed: int = 0
    # tracking_overhead logs to the runner's store (MLFLOW_TRACKING_URI or mlruns/mlflow.db),
    # or, with `--no-mlflow`, to a throw-away SQLite store
    temporary_store: bool = False
    repeats_override: int | None = None  # `--repeats N`: N pairs for every benchmark

    @property
    def sizes(self) -> dict:
        return PROFILES[self.profile]

    @property
    def repeats(self) -> dict:
        counts = dict(PROFILES[self.profile]["repeats"])
        if self.repeats_override:
            for key in ("fast", "step", "slow", "generation"):
                counts[key] = self.repeats_override
        return counts


def require(module: str, attribute: str | None = None, what: str | None = None):
    """Import `module` (and get `attribute`), or raise `Skip` naming what is missing."""
    name = f"{module}.{attribute}" if attribute else module
    try:
        found = importlib.import_module(module)
        return getattr(found, attribute) if attribute else found
    except (ImportError, AttributeError) as err:
        raise Skip(f"{what or name} is not available yet ({name}: {err})") from None


# --------------------------------------------------------------------- steps


def compiled_step(
    forward: Callable[[], object],
    variables: Callable[[], list],
    jit_compile: bool,
    watch: tuple = (),
    optimizer=None,
) -> Callable[[], float]:
    """One compiled training step: forward + backward (+ optimizer update) in a `tf.function`.

    `forward()` returns a scalar loss. It is run once eagerly first, so every
    layer is built; `variables()` then lists the trainable variables. Tensors
    in `watch` (inputs) get gradients too, so layers without weights still do
    a backward pass. The returned callable runs the step and fetches the loss
    to the host.
    """
    import tensorflow as tf

    forward()
    weights = list(variables())
    if optimizer is not None:
        optimizer.build(weights)

    @tf.function(jit_compile=jit_compile, autograph=False)  # Keras layers need no autograph
    def step():
        with tf.GradientTape() as tape:
            for tensor in watch:
                tape.watch(tensor)
            loss = forward()
        grads = tape.gradient(loss, weights + list(watch))
        if optimizer is not None:
            optimizer.apply_gradients(zip(grads[: len(weights)], weights))
            return loss, grads[len(weights) :]
        return loss, grads

    def run() -> float:
        loss, _ = step()
        return float(loss)

    return run


def _rng(options: Options) -> np.random.Generator:
    return np.random.default_rng(options.seed)


def _adam():
    import keras

    return keras.optimizers.Adam(1e-3)


def _mean_square(x):
    from keras import ops

    return ops.mean(ops.square(ops.cast(x, "float32")))


# ----------------------------------------------------------------- benchmarks


def pooling_overhead(options: Options) -> dict:
    """LSTM classifier step with AttentionPooling vs with GlobalAveragePooling1D."""
    import keras

    pooling_cls = require("keras_attn_rnn.layers", "AttentionPooling")
    s = options.sizes["pooling_overhead"]
    rng = _rng(options)
    tokens = rng.integers(1, s["vocab"], size=(s["batch"], s["time"])).astype("int32")
    labels = rng.integers(0, 2, size=(s["batch"],)).astype("int32")
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def classifier(pooling):
        inputs = keras.Input((s["time"],), batch_size=s["batch"], dtype="int32")
        x = keras.layers.Embedding(s["vocab"], s["embedding_dim"])(inputs)
        x = keras.layers.LSTM(s["units"], return_sequences=True)(x)
        outputs = keras.layers.Dense(2)(pooling(x))
        model = keras.Model(inputs, outputs)
        return compiled_step(
            lambda: loss_fn(labels, model(tokens, training=True)),
            lambda: model.trainable_variables,
            options.jit_compile,
            optimizer=_adam(),
        )

    project = classifier(pooling_cls())
    peer = classifier(keras.layers.GlobalAveragePooling1D())
    r = options.repeats
    result = timing.paired(project, peer, r["step"], r["warmup"])
    return {
        **result,
        "project": "Embedding -> LSTM -> AttentionPooling(tanh_dot, learned query) -> Dense, "
        "Adam step",
        "peer": "the same with keras.layers.GlobalAveragePooling1D",
        "shapes": dict(s, classes=2),
    }


def causal_dot_vs_keras(options: Options) -> dict:
    """SequenceAttention(score='dot') causal vs keras.layers.Attention causal, fwd+bwd."""
    import keras
    from keras import ops

    layer_cls = require("keras_attn_rnn.layers", "SequenceAttention")
    s = options.sizes["causal_dot_vs_keras"]
    x = ops.convert_to_tensor(
        _rng(options).standard_normal((s["batch"], s["time"], s["dim"])).astype("float32")
    )

    def attention_step(layer):
        return compiled_step(
            lambda: _mean_square(layer([x, x], use_causal_mask=True)),
            lambda: layer.trainable_variables,
            options.jit_compile,
            watch=(x,),
        )

    project = attention_step(layer_cls(score="dot"))
    peer = attention_step(keras.layers.Attention())
    r = options.repeats
    result = timing.paired(project, peer, r["fast"], r["warmup"])
    return {
        **result,
        "project": "SequenceAttention(score='dot'), use_causal_mask=True, forward + backward",
        "peer": "keras.layers.Attention(), use_causal_mask=True, forward + backward",
        "shapes": dict(s, self_attention=True),
    }


def additive_vs_keras(options: Options) -> dict:
    """SequenceAttention(score='additive') vs Dense projections + keras.layers.AdditiveAttention."""
    import keras
    from keras import ops

    layer_cls = require("keras_attn_rnn.layers", "SequenceAttention")
    s = options.sizes["additive_vs_keras"]
    rng = _rng(options)
    query = ops.convert_to_tensor(
        rng.standard_normal((s["batch"], s["query_len"], s["dim"])).astype("float32")
    )
    value = ops.convert_to_tensor(
        rng.standard_normal((s["batch"], s["value_len"], s["dim"])).astype("float32")
    )

    project_layer = layer_cls(score="additive", units=s["units"])
    q_proj = keras.layers.Dense(s["units"], use_bias=False)
    k_proj = keras.layers.Dense(s["units"], use_bias=False)
    keras_additive = keras.layers.AdditiveAttention(use_scale=True)

    def peer_forward():
        return _mean_square(keras_additive([q_proj(query), value, k_proj(value)]))

    project = compiled_step(
        lambda: _mean_square(project_layer([query, value])),
        lambda: project_layer.trainable_variables,
        options.jit_compile,
        watch=(query, value),
    )
    peer = compiled_step(
        peer_forward,
        lambda: (
            q_proj.trainable_variables
            + k_proj.trainable_variables
            + keras_additive.trainable_variables
        ),
        options.jit_compile,
        watch=(query, value),
    )
    r = options.repeats
    result = timing.paired(project, peer, r["fast"], r["warmup"])
    return {
        **result,
        "project": "SequenceAttention(score='additive', units) on [query, value], fwd + bwd",
        "peer": "Dense(units, no bias) on query and on value + "
        "keras.layers.AdditiveAttention(use_scale=True), fwd + bwd",
        "shapes": s,
    }


def _decoder_data(options: Options):
    from keras import ops

    s = options.sizes["decoder"]
    b, src, tgt, u, v = s["batch"], s["source_len"], s["target_len"], s["units"], s["vocab"]
    rng = _rng(options)
    memory = rng.standard_normal((b, src, u)).astype("float32")
    lengths = rng.integers(max(1, src // 2), src + 1, size=(b,))
    memory_mask = np.arange(src)[None, :] < lengths[:, None]
    inputs = rng.standard_normal((b, tgt, u)).astype("float32")
    targets = rng.integers(0, v, size=(b, tgt)).astype("int32")
    return s, tuple(ops.convert_to_tensor(a) for a in (memory, memory_mask, inputs, targets))


def decoder_step(
    kind: str, options: Options, jit_compile: bool, score: str = "additive"
) -> Callable[[], float]:
    """A training step of a Bahdanau (in-loop) or Luong (parallel) decoder.

    The workload of `bench_tfa_peer.py`: memory `(B, S, U)` with per-example
    lengths in `[S/2, S]`, decoder inputs `(B, T, U)`, additive attention
    with `U` units (or another `score`), LSTM(U), attention layer of size
    `U`, `Dense(V)` projection, sparse cross-entropy from logits and an Adam
    update.
    """
    import keras
    from keras import ops

    s, (memory, memory_mask, inputs, targets) = _decoder_data(options)
    u = s["units"]
    units = {"units": u} if score == "additive" else {}
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    projection = keras.layers.Dense(s["vocab"])
    if kind == "bahdanau":
        decoder_cls = require("keras_attn_rnn.layers", "AttentionDecoder")
        decoder = decoder_cls(
            keras.layers.LSTMCell(u), score=score, attention_layer_size=u, **units
        )
        layers = [decoder, projection]

        def hidden():
            return decoder([inputs, memory], mask=[None, memory_mask])
    else:
        layer_cls = require("keras_attn_rnn.layers", "SequenceAttention")
        rnn = keras.layers.LSTM(u, return_sequences=True)
        attention = layer_cls(score=score, **units)
        attention_layer = keras.layers.Dense(u, activation="tanh", use_bias=False)
        layers = [rnn, attention, attention_layer, projection]

        def hidden():
            h = rnn(inputs)
            context = attention([h, memory], mask=[None, memory_mask])
            return attention_layer(ops.concatenate([h, context], axis=-1))

    return compiled_step(
        lambda: loss_fn(targets, projection(hidden())),
        lambda: [w for layer in layers for w in layer.trainable_variables],
        jit_compile,
        optimizer=_adam(),
    )


def luong_parallel_speedup(options: Options) -> dict:
    """Luong decoder (LSTM over all steps, then SequenceAttention) vs in-loop AttentionDecoder.

    Both sides use the same score: Luong's own `general` for the reported
    ratio, and the additive score of the decoder benchmark as a variant (its
    B*T*S*U tanh work is the same in and out of the loop, so it gains less).
    """
    r = options.repeats
    project = decoder_step("luong", options, options.jit_compile, score="general")
    peer = decoder_step("bahdanau", options, options.jit_compile, score="general")
    result = timing.paired(project, peer, r["step"], r["warmup"], speedup=True)
    project = decoder_step("luong", options, options.jit_compile)
    peer = decoder_step("bahdanau", options, options.jit_compile)
    additive = timing.paired(project, peer, max(1, r["step"] // 2), r["warmup"], speedup=True)
    return {
        **result,
        "project": "Luong: LSTM(U) over the target, SequenceAttention(general) over the "
        "memory, tanh attention layer, Dense(V), Adam step",
        "peer": "AttentionDecoder(LSTMCell(U), general, attention_layer_size=U) with input "
        "feeding, Dense(V), Adam step",
        "score_additive": {
            k: additive[k]
            for k in ("ratio", "spread", "project_s", "peer_s", "ratio_of_minimums", "repeats")
        },
        "shapes": options.sizes["decoder"],
    }


def _run_tfa(options: Options, jit: bool, repeats: int, warmup: int) -> dict:
    s = options.sizes["decoder"]
    script = Path(__file__).resolve().parents[1] / "bench_tfa_peer.py"
    command = [
        options.tfa_python,
        str(script),
        f"--jit={int(jit)}",
        f"--repeats={repeats}",
        f"--warmup={warmup}",
        f"--batch={s['batch']}",
        f"--source-len={s['source_len']}",
        f"--target-len={s['target_len']}",
        f"--units={s['units']}",
        f"--vocab={s['vocab']}",
        f"--seed={options.seed}",
    ]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise RuntimeError(f"tfa peer failed (exit {done.returncode}): {' | '.join(tail)}")
    return json.loads(lines[-1])


def decoder_vs_tfa(options: Options) -> dict:
    """AttentionDecoder training step vs tfa AttentionWrapper + RNN in a second interpreter.

    The peer cannot share this process (TF 2.15 + tfa vs TF 2.21 + Keras 3),
    so the alternation is by blocks: each round times a block of project
    steps here, then runs the peer script for a block of the same size (its
    own warm-up excluded), the order alternating from round to round. Both
    sides are measured with and without XLA; the speedup compares each
    side's fastest mode.
    """
    if not options.tfa_python:
        raise Skip(
            "no --tfa-python given: the tfa peer needs a second interpreter with "
            "TF 2.15 + tensorflow-addons (e.g. --tfa-python /work/tfa-venv/bin/python)"
        )
    if not Path(options.tfa_python).exists():
        raise Skip(f"--tfa-python {options.tfa_python} does not exist")
    r = options.repeats
    block = r["step"]
    modes = {"graph": False, "xla": True}
    project_steps, errors = {}, {}
    for mode, jit in modes.items():
        try:
            step = decoder_step("bahdanau", options, jit)
            for _ in range(r["warmup"]):
                step()
            project_steps[mode] = step
        except Skip:
            raise
        except Exception as err:  # e.g. an op XLA cannot compile: report, keep the other mode
            errors[f"project_{mode}"] = f"{type(err).__name__}: {str(err)[:300]}"
    project_blocks = {m: [] for m in modes}
    peer_blocks = {m: [] for m in modes}
    peer_info = {}
    for round_index in range(r["tfa_rounds"]):
        for mode, jit in modes.items():
            if f"peer_{mode}" in errors and mode not in project_steps:
                continue

            def project_block(mode=mode):
                if mode in project_steps:
                    times = [timing.clock(project_steps[mode]) for _ in range(block)]
                    project_blocks[mode].append(times)

            def peer_block(mode=mode, jit=jit):
                if f"peer_{mode}" in errors:
                    return
                try:
                    record = _run_tfa(options, jit, block, r["warmup"])
                except Exception as err:
                    errors[f"peer_{mode}"] = f"{type(err).__name__}: {str(err)[:300]}"
                    return
                peer_blocks[mode].append(record["times_s"])
                peer_info.update({k: record[k] for k in ("tf", "tfa", "optimizer") if k in record})

            if round_index % 2 == 0:
                project_block()
                peer_block()
            else:
                peer_block()
                project_block()

    def med(blocks):
        return float(np.median([t for b in blocks for t in b])) if blocks else None

    per_mode = {}
    for mode in modes:
        p, q = med(project_blocks[mode]), med(peer_blocks[mode])
        per_mode[mode] = {
            "project_s": p,
            "peer_s": q,
            "speedup": (q / p) if p and q else None,
            "jit_compile": modes[mode],
        }
    project_modes = [m for m in modes if per_mode[m]["project_s"]]
    peer_modes = [m for m in modes if per_mode[m]["peer_s"]]
    if not project_modes or not peer_modes:
        raise RuntimeError(f"no mode measured on both sides: {errors}")
    best_project = min(project_modes, key=lambda m: per_mode[m]["project_s"])
    best_peer = min(peer_modes, key=lambda m: per_mode[m]["peer_s"])
    rounds = min(len(project_blocks[best_project]), len(peer_blocks[best_peer]))
    project_times = [float(np.median(b)) for b in project_blocks[best_project][:rounds]]
    peer_times = [float(np.median(b)) for b in peer_blocks[best_peer][:rounds]]
    result = timing.summarize(project_times, peer_times, speedup=True)
    result["spread"]["what"] = "quartiles and extremes of the per-round ratios of block medians"
    return {
        **result,
        "project_s": per_mode[best_project]["project_s"],
        "peer_s": per_mode[best_peer]["peer_s"],
        "project": f"AttentionDecoder(LSTMCell(U), additive, attention_layer_size=U), Dense(V), "
        f"Adam step in one tf.function; fastest mode: {best_project}",
        "peer": f"tfa AttentionWrapper(BahdanauAttention(U), LSTMCell(U)) + tf.keras RNN, "
        f"same step (experiments/bench_tfa_peer.py); fastest mode: {best_peer}",
        "modes": per_mode,
        "fastest": {"project": best_project, "peer": best_peer},
        "peer_versions": peer_info,
        "block": block,
        "method": "blocks alternating between this process and the peer interpreter",
        "errors": errors or None,
        "shapes": options.sizes["decoder"],
    }


def _language_model(options: Options):
    import keras

    lm_cls = require("keras_attn_rnn.models", "AttentiveLanguageModel")
    generate = require("keras_attn_rnn.generation", "generate")
    s = options.sizes["generation"]
    keras.utils.set_random_seed(options.seed)
    model = lm_cls(
        vocab_size=s["vocab"],
        embedding_dim=s["embedding_dim"],
        units=s["units"],
        attention={"score": "dot"},
    )
    prompts = _rng(options).integers(1, s["vocab"], size=(s["batch"], s["prompt_len"]))
    prompts = prompts.astype("int32")
    model(prompts)
    return s, model, prompts, generate


def generation_cache_speedup(options: Options) -> dict:
    """Cached greedy generation vs greedy decoding that re-runs the whole prefix each token."""
    import tensorflow as tf

    s, model, prompts, generate = _language_model(options)
    n = s["tokens"]

    def cached():
        return generate(model, prompts, n, strategy="greedy", jit_compile=options.jit_compile)

    # Shapes change every token: one trace with a dynamic time axis (no XLA).
    @tf.function(input_signature=[tf.TensorSpec((s["batch"], None), tf.int32)], autograph=False)
    def next_token(tokens):
        logits = model(tokens, training=False)[:, -1]
        logits = tf.concat([tf.fill([tf.shape(logits)[0], 1], -1e30), logits[:, 1:]], axis=-1)
        return tf.argmax(logits, axis=-1, output_type=tf.int32)

    def rerun():
        tokens = prompts
        for _ in range(n):
            token = next_token(tokens).numpy()
            tokens = np.concatenate([tokens, token[:, None]], axis=1)
        return tokens[:, prompts.shape[1] :]

    cached()
    next_token(prompts)  # trace both; timed runs are whole generations
    agree = bool(np.array_equal(cached().tokens, rerun()))
    r = options.repeats
    result = timing.paired(cached, rerun, r["generation"], 0, speedup=True)
    return {
        **result,
        "project": "keras_attn_rnn.generation.generate(strategy='greedy'): one RNN step + one "
        "attention over the key cache per token, in a compiled while loop",
        "peer": "greedy decoding that runs the AttentiveLanguageModel on the whole prefix for "
        "every new token (one tf.function with a dynamic time axis)",
        "same_tokens": agree,
        "shapes": dict(s, model="AttentiveLanguageModel(LSTM, dot causal self-attention)"),
    }


def beam4_cost(options: Options) -> dict:
    """Beam search (width 4) vs greedy search, same model, prompts and length."""
    s, model, prompts, generate = _language_model(options)
    n = s["tokens"]

    def beam():
        return generate(
            model, prompts, n, strategy="beam", beam_width=4, jit_compile=options.jit_compile
        )

    def greedy():
        return generate(model, prompts, n, strategy="greedy", jit_compile=options.jit_compile)

    r = options.repeats
    result = timing.paired(beam, greedy, r["generation"], min(1, r["warmup"]))
    return {
        **result,
        "project": "generate(strategy='beam', beam_width=4)",
        "peer": "generate(strategy='greedy')",
        "shapes": dict(s, beam_width=4, model="AttentiveLanguageModel"),
    }


class _Store:
    """A scratch folder (checkpoints), and MLflow pointed at the runner's store or, with
    `temporary=True`, at a throw-away SQLite store of the same kind."""

    def __init__(self, temporary: bool):
        self.temporary = temporary

    def __enter__(self):

        self.folder = tempfile.TemporaryDirectory(prefix="bench-tracking-")
        self.previous_env = os.environ.get("MLFLOW_TRACKING_URI")
        if self.temporary:
            uri = f"sqlite:///{Path(self.folder.name) / 'mlflow.db'}"
            os.environ["MLFLOW_TRACKING_URI"] = uri
        return Path(self.folder.name)

    def __exit__(self, *exc):
        import mlflow

        from experiments import tracking

        if self.previous_env is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = self.previous_env
        # The runner's store (env or mlruns/), never MLflow's cwd default.
        mlflow.set_tracking_uri(tracking.tracking_uri())
        self.folder.cleanup()


def tracking_overhead(options: Options) -> dict:
    """Epochs of the runner's training with its MLflow logging callback vs without.

    Both sides run the runner's callbacks (`training.make_callbacks`: clock,
    evaluation, checkpoint); "with" adds the `RunLogger` that logs the
    epoch's metrics, attention heatmaps and sample generations to an MLflow
    run (experiment `bench-tracking-overhead`) in the runner's store, or in a
    throw-away SQLite store with `--no-mlflow`. Epochs are numbered on, so
    `heatmap_every > 1` draws heatmaps on some of the timed epochs only. A
    sample is `tracking_epochs` consecutive epochs, the logged side including
    the wait for its last heatmaps (which render on the artifact thread).
    """
    for module, attribute in (
        ("experiments.training", "prepare"),
        ("experiments.training", "make_callbacks"),
        ("experiments.training", "compile_model"),
        ("experiments.tracking", "connect"),
        ("experiments.tracking", "Tracker"),
        ("experiments.callbacks", "RunLogger"),
        ("experiments.modeling", "build_model"),
        ("experiments.config", "load_config"),
    ):
        require(module, attribute, what=f"the runner's {module}.{attribute}")
    import keras

    from experiments import callbacks as cb
    from experiments import cli, config, modeling, tracking, training

    s = options.sizes["tracking"]
    overrides = [
        *s["set"],
        "train.epochs=1000",
        "train.verbose=0",
        f"train.jit_compile={str(options.jit_compile).lower()}",
        "tracking.log_model=false",
        "tracking.experiment=bench-tracking-overhead",
    ]
    cfg = config.load_config(cli.resolve_config_path(s["config"]), overrides)
    prepared = training.prepare(cfg)
    cfg, task = prepared.cfg, prepared.task
    keras.utils.set_random_seed(cfg.train.seed)
    model = modeling.build_model(cfg, task)
    training.compile_model(model, cfg, task)
    model(task.train.take(slice(0, 2)).inputs)

    with _Store(options.temporary_store) as folder:
        client = tracking.connect()
        experiment = tracking.experiment_id(client, cfg.tracking.experiment)
        run_id = client.create_run(experiment, run_name="tracking-overhead").info.run_id
        store = "temporary sqlite store" if options.temporary_store else tracking.tracking_uri()
        tracker = tracking.Tracker(client, run_id)
        batches = cb.EpochBatches(task.train, cfg.train.batch_size, cfg.train.seed)
        with_logging = training.make_callbacks(
            cfg, task, tracker, folder / "checkpoints", batches, None
        )
        without_logging = [c for c in with_logging if not isinstance(c, cb.RunLogger)]
        if len(without_logging) == len(with_logging):
            raise RuntimeError("make_callbacks returned no RunLogger to leave out")
        epoch = [0]

        r = options.repeats
        span = r["tracking_epochs"]

        def epochs(callbacks):
            start = epoch[0]
            epoch[0] += span
            model.fit(
                batches,
                validation_data=(task.val.inputs, task.val.y),
                validation_batch_size=cfg.train.batch_size,
                initial_epoch=start,
                epochs=start + span,
                callbacks=callbacks,
                verbose=0,
            )

        def with_tracking():
            epochs(with_logging)
            tracker.wait()  # heatmaps render while the next epoch trains; the last one is timed

        started = time.perf_counter()
        result = timing.paired(
            with_tracking, lambda: epochs(without_logging), r["slow"], min(1, r["warmup"])
        )
        elapsed = time.perf_counter() - started
        tracker.end()
    return {
        **result,
        "project": f"model.fit for {span} epoch(s) with training.make_callbacks(...) "
        "(clock, evaluation, checkpoint, RunLogger -> MLflow), then the wait for the heatmaps",
        "peer": "the same epochs with the same callbacks except RunLogger",
        "store": store,
        "mlflow_run": None if options.temporary_store else run_id,
        "logged_per_epoch": "metrics, heatmaps every "
        f"{cfg.tracking.heatmap_every} epoch(s) ({cfg.task.num_probes} probes), "
        f"{cfg.tracking.num_samples} sample generations",
        "wall_s": elapsed,
        "shapes": {
            "config": s["config"],
            "overrides": s["set"],
            "task": task.name,
            "train_examples": len(task.train),
            "batch_size": cfg.train.batch_size,
            "batches_per_epoch": len(batches),
            "units": cfg.model.units,
        },
    }


BENCHMARKS = {
    "pooling_overhead": pooling_overhead,
    "causal_dot_vs_keras": causal_dot_vs_keras,
    "additive_vs_keras": additive_vs_keras,
    "decoder_vs_tfa": decoder_vs_tfa,
    "luong_parallel_speedup": luong_parallel_speedup,
    "generation_cache_speedup": generation_cache_speedup,
    "beam4_cost": beam4_cost,
    "tracking_overhead": tracking_overhead,
}


def goal_met(goal: str, ratio: float) -> bool:
    """Whether `ratio` meets a goal written `"<=1.10"` or `">=10"`."""
    bound = float(goal[2:])
    return ratio <= bound if goal.startswith("<=") else ratio >= bound
