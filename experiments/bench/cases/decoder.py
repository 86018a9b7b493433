"""Decoder benchmarks: the training step of `AttentionDecoder` (Bahdanau, in the loop) and
of the Luong decoder (parallel), against each other and against tfa in a second interpreter;
and the ready `Seq2Seq` translator's against the plain-Keras one."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import keras
import numpy as np
from keras import ops

from experiments.bench import timing
from experiments.bench.cases.common import Options, Skip, adam, compiled_step, random_generator
from experiments.bench.goals import goal_met
from experiments.peers import keras_seq2seq
from keras_attn_rnn import copying, losses, mechanisms, scores
from keras_attn_rnn.layers import AttentionDecoder, SequenceAttention
from keras_attn_rnn.models import Seq2Seq

# Run as a script by the `--tfa-python` interpreter (TF 2.15 + tensorflow-addons), never imported.
TFA_PEER_SCRIPT = Path(__file__).resolve().parents[1] / "tfa_peer.py"


def _decoder_data(options: Options):

    s = options.sizes["decoder"]
    b, src, tgt, u, v = s["batch"], s["source_len"], s["target_len"], s["units"], s["vocab"]
    rng = random_generator(options)
    memory = rng.standard_normal((b, src, u)).astype("float32")
    lengths = rng.integers(max(1, src // 2), src + 1, size=(b,))
    memory_mask = np.arange(src)[None, :] < lengths[:, None]
    inputs = rng.standard_normal((b, tgt, u)).astype("float32")
    targets = rng.integers(0, v, size=(b, tgt)).astype("int32")
    return s, tuple(ops.convert_to_tensor(a) for a in (memory, memory_mask, inputs, targets))


def decoder_step(
    kind: str, options: Options, jit_compile: bool, score: str = "additive", mechanism=None
) -> Callable[[], float]:
    """A training step of a Bahdanau (in-loop) or Luong (parallel) decoder, or (`"floor"`)
    of the work a Bahdanau decoder with input feeding cannot avoid, without its attention.

    The workload of `tfa_peer.py`: memory `(B, S, U)` with per-example
    lengths in `[S/2, S]`, decoder inputs `(B, T, U)`, additive attention
    with `U` units (or another `score`), LSTM(U), attention layer of size
    `U`, `Dense(V)` projection, sparse cross-entropy from logits and an Adam
    update. `mechanism(units)`, if given, builds the Bahdanau decoder's
    attention mechanism instead of the content `score`.
    """

    s, (memory, memory_mask, inputs, targets) = _decoder_data(options)
    u = s["units"]
    units = {"units": u} if score == "additive" else {}
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    projection = keras.layers.Dense(s["vocab"])
    if kind == "bahdanau":
        if mechanism is None:
            attention = {"score": score, **units}
        else:
            attention = {"attention": mechanism(u)}
        decoder = AttentionDecoder(keras.layers.LSTMCell(u), attention_layer_size=u, **attention)
        layers = [decoder, projection]

        def hidden():
            return decoder([inputs, memory], mask=[None, memory_mask])
    elif kind == "floor":
        # What any Bahdanau decoder with input feeding does at least: the LSTM over inputs of
        # width 2U (the input and the fed-back attention; here all of it one GEMM before the
        # loop), the attention layer and the projection, with no attention scores at all.
        rnn = keras.layers.LSTM(u, return_sequences=True)
        attention_layer = keras.layers.Dense(u, activation="tanh", use_bias=False)
        layers = [rnn, attention_layer, projection]
        fed = ops.concatenate([inputs, ops.zeros_like(inputs)], axis=-1)

        def hidden():
            h = rnn(fed)
            return attention_layer(ops.concatenate([h, h], axis=-1))
    else:
        rnn = keras.layers.LSTM(u, return_sequences=True)
        attention = SequenceAttention(score=score, **units)
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
        optimizer=adam(),
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


def _mechanism_cost(options: Options, mechanism) -> dict:
    """A Bahdanau decoder training step with `mechanism(units)` vs content additive attention."""
    r = options.repeats
    project = decoder_step("bahdanau", options, options.jit_compile, mechanism=mechanism)
    peer = decoder_step("bahdanau", options, options.jit_compile)
    return timing.paired(project, peer, r["step"], r["warmup"])


def monotonic_parallel_cost(options: Options) -> dict:
    """Bahdanau-monotonic decoder step (parallel mode) vs content Bahdanau; recursive reported."""
    result = _mechanism_cost(options, lambda u: mechanisms.MonotonicAttention(scores.Additive(u)))
    recursive = _mechanism_cost(
        options, lambda u: mechanisms.MonotonicAttention(scores.Additive(u), mode="recursive")
    )
    return {
        **result,
        "project": "AttentionDecoder(LSTMCell(U), MonotonicAttention(Additive(U), 'parallel'), "
        "attention_layer_size=U), Dense(V), Adam step",
        "peer": "the same with content additive attention (score='additive')",
        "recursive_mode": {
            k: recursive[k] for k in ("ratio", "spread", "project_s", "peer_s", "repeats")
        },
        "shapes": options.sizes["decoder"],
    }


def location_cost(options: Options) -> dict:
    """Location-sensitive decoder step (Tacotron 2's: 32 filters of width 31 over the previous
    and cumulative alignments) vs content Bahdanau."""
    result = _mechanism_cost(
        options,
        lambda u: mechanisms.LocationSensitiveAttention(
            u, filters=32, kernel_size=31, location_features="both"
        ),
    )
    return {
        **result,
        "project": "AttentionDecoder(LSTMCell(U), LocationSensitiveAttention(U, filters=32, "
        "kernel_size=31, location_features='both'), attention_layer_size=U), Dense(V), Adam step",
        "peer": "the same with content additive attention (score='additive')",
        "shapes": options.sizes["decoder"],
    }


# The newer mechanisms' cost cases (`<name>_cost`), by registry name, with their papers'
# settings: GMM v2b with 5 mixtures (Battenberg et al. 2020), DCA with 8 static and 8
# dynamic filters of width 21 and a prior of length 11 (the same paper), and Dubois et al.'s
# location attention with its defaults (additive content score).
MECHANISM_COSTS = {
    "gmm": dict(num_mixtures=5, version="v2b"),
    "dca": dict(
        static_filters=8,
        static_kernel_size=21,
        dynamic_filters=8,
        dynamic_kernel_size=21,
        prior_length=11,
    ),
    "relative_location": {},
}


def mechanism_cost(name: str) -> Callable[[Options], dict]:
    """The cost case of registered mechanism `name`: a Bahdanau decoder step with
    `mechanisms.get(name, units=U, **MECHANISM_COSTS[name])` vs content Bahdanau."""
    settings = MECHANISM_COSTS[name]

    def case(options: Options) -> dict:
        result = _mechanism_cost(options, lambda u: mechanisms.get(name, units=u, **settings))
        arguments = ", ".join(["U", *(f"{k}={v!r}" for k, v in settings.items())])
        return {
            **result,
            "project": f"AttentionDecoder(LSTMCell(U), {mechanisms.class_for(name).__name__}"
            f"({arguments}), attention_layer_size=U), Dense(V), Adam step",
            "peer": "the same with content additive attention (score='additive')",
            "shapes": options.sizes["decoder"],
        }

    case.__name__ = case.__qualname__ = f"{name}_cost"
    case.__doc__ = f"{name!r} mechanism decoder step vs content Bahdanau (see `mechanism_cost`)."
    return case


# Extended ids of the copy case: every source word may be out of the vocabulary.
COPY_MAX_OOV = 50


def copy_cost(options: Options) -> dict:
    """`Seq2Seq(copy=True)`'s decoder training step (the pointer-generator head) vs content
    Bahdanau: the decoder outputs `[s_t; h*_t]` (`output_attention="both"`), the projection
    and `p_gen = sigmoid(w [s_t; h*_t; x_t] + b)` read them, the loss is the negative log of
    the mixture over `V + 50` extended ids (`PointerGeneratorLoss`)."""
    s, (memory, memory_mask, inputs, targets) = _decoder_data(options)
    u, vocab = s["units"], s["vocab"]
    rng = random_generator(options)
    size = vocab + COPY_MAX_OOV
    source_ext = rng.integers(1, size, size=memory_mask.shape) * np.asarray(memory_mask)
    source_ext = ops.convert_to_tensor(source_ext.astype("int32"))
    extended_targets = ops.convert_to_tensor(
        rng.integers(1, size, size=targets.shape).astype("int32")
    )
    decoder = AttentionDecoder(
        keras.layers.LSTMCell(u), units=u, attention_layer_size=u, output_attention="both"
    )
    projection = keras.layers.Dense(vocab)
    p_gen = keras.layers.Dense(1, activation="sigmoid")
    loss_fn = losses.PointerGeneratorLoss()

    def forward():
        outputs, alignments = decoder(
            [inputs, memory], mask=[None, memory_mask], return_attention_scores=True
        )
        probabilities = copying.pointer_generator_mixture(
            ops.softmax(projection(outputs), axis=-1),
            alignments,
            p_gen(ops.concatenate([outputs, inputs], axis=-1)),
            source_ext,
            COPY_MAX_OOV,
            source_mask=memory_mask,
        )
        return loss_fn(extended_targets, probabilities)

    project = compiled_step(
        forward,
        lambda: [w for layer in (decoder, projection, p_gen) for w in layer.trainable_variables],
        options.jit_compile,
        optimizer=adam(),
    )
    peer = decoder_step("bahdanau", options, options.jit_compile)
    r = options.repeats
    return {
        **timing.paired(project, peer, r["step"], r["warmup"]),
        "project": "AttentionDecoder(LSTMCell(U), additive, attention_layer_size=U, "
        "output_attention='both'), Dense(V) and p_gen Dense(1) over [output; input], "
        f"pointer_generator_mixture over V + {COPY_MAX_OOV} extended ids, "
        "PointerGeneratorLoss, Adam step",
        "peer": "AttentionDecoder(LSTMCell(U), additive, attention_layer_size=U), Dense(V), "
        "sparse cross-entropy from logits, Adam step",
        "shapes": {**options.sizes["decoder"], "max_oov": COPY_MAX_OOV},
    }


def _run_tfa(options: Options, jit: bool, repeats: int, warmup: int) -> dict:
    s = options.sizes["decoder"]
    command = [
        options.tfa_python,
        str(TFA_PEER_SCRIPT),
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
    project_steps, floor_steps, errors = {}, {}, {}
    for mode, jit in modes.items():
        try:
            step = decoder_step("bahdanau", options, jit)
            floor = decoder_step("floor", options, jit)
            for _ in range(r["warmup"]):
                step()
                floor()
            project_steps[mode], floor_steps[mode] = step, floor
        except Exception as err:  # e.g. an op XLA cannot compile: report, keep the other mode
            errors[f"project_{mode}"] = f"{type(err).__name__}: {str(err)[:300]}"
    floor_blocks = {m: [] for m in modes}
    project_blocks = {m: [] for m in modes}
    peer_blocks = {m: [] for m in modes}
    peer_info = {}
    for round_index in range(r["tfa_rounds"]):
        for mode, jit in modes.items():
            if f"peer_{mode}" in errors and mode not in project_steps:
                continue

            def project_block(mode=mode):
                if mode in project_steps:
                    times, floors = [], []
                    for _ in range(block):  # the floor step alternates with the decoder's
                        times.append(timing.clock(project_steps[mode]))
                        floors.append(timing.clock(floor_steps[mode]))
                    project_blocks[mode].append(times)
                    floor_blocks[mode].append(floors)

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
        f = med(floor_blocks[mode])
        per_mode[mode] = {
            "project_s": p,
            "peer_s": q,
            "floor_s": f,
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
        # The floor: the same step with no attention scores (see decoder_step("floor")), in
        # the project's fastest mode; peer_s / floor_s is the most speedup any decoder with
        # input feeding could show against the peer here.
        "floor_s": per_mode[best_project]["floor_s"],
        "speedup_limit": per_mode[best_peer]["peer_s"] / per_mode[best_project]["floor_s"],
        "project": f"AttentionDecoder(LSTMCell(U), additive, attention_layer_size=U), Dense(V), "
        f"Adam step in one tf.function; fastest mode: {best_project}",
        "peer": f"tfa AttentionWrapper(BahdanauAttention(U), LSTMCell(U)) + tf.keras RNN, "
        f"same step (experiments/bench/tfa_peer.py); fastest mode: {best_peer}",
        "modes": per_mode,
        "fastest": {"project": best_project, "peer": best_peer},
        "peer_versions": peer_info,
        "block": block,
        "method": "blocks alternating between this process and the peer interpreter",
        "errors": errors or None,
        "shapes": options.sizes["decoder"],
    }


def _seq2seq_data(options: Options):
    """Source and target ids of the `seq2seq` shapes, 0-padded to per-example lengths in
    `[L/2, L]`, and the next-token targets."""
    s = options.sizes["translator"]
    b, src, tgt, v = s["batch"], s["source_len"], s["target_len"], s["vocab"]
    rng = random_generator(options)

    def ids(length):
        x = rng.integers(1, v, size=(b, length)).astype("int32")
        lengths = rng.integers(max(1, length // 2), length + 1, size=(b,))
        return np.where(np.arange(length)[None, :] < lengths[:, None], x, 0).astype("int32")

    source, target = ids(src), ids(tgt + 1)
    data = (source, target[:, :-1], target[:, 1:])
    return s, tuple(ops.convert_to_tensor(a) for a in data)


def seq2seq_step(kind: str, options: Options, jit_compile: bool) -> Callable[[], float]:
    """A training step (forward, backward, Adam) of a ready translator: `"peer"` (the
    plain-Keras `experiments.peers.keras_seq2seq`), `"bahdanau"` (`Seq2Seq`'s input-feeding
    decoder, additive score), `"luong_dot"` or `"luong_additive"` (`Seq2Seq(decoder="luong")`
    with that score); sparse cross-entropy from the logits over the target's real tokens."""
    s, (source, target_in, target_out) = _seq2seq_data(options)
    sizes = (s["vocab"], s["vocab"], s["embedding_dim"], s["units"])
    if kind == "peer":
        model = keras_seq2seq.build(*sizes)
    else:
        decoder, score = {
            "bahdanau": ("bahdanau", "additive"),
            "luong_dot": ("luong", "dot"),
            "luong_additive": ("luong", "additive"),
        }[kind]
        source_vocab, target_vocab, embedding_dim, units = sizes
        model = Seq2Seq(
            source_vocab,
            target_vocab,
            embedding_dim=embedding_dim,
            units=units,
            decoder=decoder,
            attention={"score": score},
        )
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    return compiled_step(
        lambda: loss_fn(target_out, model([source, target_in], training=True)),
        lambda: model.trainable_variables,
        jit_compile,
        optimizer=adam(),
    )


# The goals of the comparisons `seq2seq_vs_keras_peer` reports beside its main ratio.
SEQ2SEQ_GOALS = {"luong_dot_vs_peer": "<=1.1", "luong_additive_vs_dot": "<=1.5"}


def seq2seq_vs_keras_peer(options: Options) -> dict:
    """`Seq2Seq(decoder="bahdanau")`'s training step vs the plain-Keras translator.

    The peer (`experiments/peers/keras_seq2seq.py`: LSTM encoder and decoder,
    `keras.layers.Attention`, a tanh attention layer) runs in its fastest mode,
    graph or XLA, chosen by timing both after their warm-up; the project's
    models run in the suite's mode (`--jit-compile`). The ratio is bahdanau /
    peer; beside it `luong_dot_vs_peer` (`Seq2Seq(decoder="luong")`, dot score)
    and `luong_additive_vs_dot` (the Luong decoder with the additive score vs
    the dot one), each with its goal.
    """
    r = options.repeats
    peers = {}
    for mode, jit in (("graph", False), ("xla", True)):
        step = seq2seq_step("peer", options, jit)
        peers[mode] = (step, timing.median_time(step, max(3, r["step"] // 2), r["warmup"]))
    peer_mode = min(peers, key=lambda m: peers[m][1])
    peer = peers[peer_mode][0]
    bahdanau = seq2seq_step("bahdanau", options, options.jit_compile)
    result = timing.paired(bahdanau, peer, r["step"], r["warmup"])
    luong_dot = seq2seq_step("luong_dot", options, options.jit_compile)
    luong_additive = seq2seq_step("luong_additive", options, options.jit_compile)
    side = {
        "luong_dot_vs_peer": timing.paired(luong_dot, peer, r["step"], r["warmup"]),
        "luong_additive_vs_dot": timing.paired(luong_additive, luong_dot, r["step"], r["warmup"]),
    }
    keep = ("ratio", "spread", "project_s", "peer_s", "ratio_of_minimums", "repeats")
    for name, measured in side.items():
        goal = SEQ2SEQ_GOALS[name]
        side[name] = {
            **{k: measured[k] for k in keep},
            "goal": goal,
            "met": goal_met(goal, measured["ratio"]),
        }
    mode = "xla" if options.jit_compile else "graph"
    return {
        **result,
        **side,
        "project": f"Seq2Seq(decoder='bahdanau') (LSTM, additive score, input feeding, "
        f"attention layer of size U), Dense(V), Adam step in one tf.function ({mode})",
        "peer": "experiments/peers/keras_seq2seq.py (LSTM encoder and decoder, "
        f"keras.layers.Attention, tanh attention layer), same step; fastest mode: {peer_mode}",
        "peer_modes_s": {m: t for m, (_, t) in peers.items()},
        "shapes": options.sizes["translator"],
    }
