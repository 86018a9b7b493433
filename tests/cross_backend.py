"""Saves every layer, the three models, a `Seq2Seq` per stateful mechanism and a copy model as
`.keras` on one backend; loads and checks on another.

Run by `test_cross_backend.py` in fresh processes (the backend is chosen before
Keras is imported):

    KERAS_BACKEND=tensorflow python tests/cross_backend.py save DIR
    KERAS_BACKEND=jax python tests/cross_backend.py check DIR

`save` writes `DIR/<case>.keras` for each case, the inputs and the outputs
(and, for the generating models, greedy tokens) to `DIR/expected.npz`, and the
case names to `DIR/cases.json`. `check` loads each file in safe mode, runs the
same inputs and prints one `OK <case> <max abs difference>` line per case; a
mismatch or a load error is printed as `FAIL <case>: ...`, and the exit status is
the number of failed cases.
"""

import json
import os
import sys
import traceback

import keras
import numpy as np
from keras import ops

import keras_attn_rnn
from keras_attn_rnn import (
    AttentionDecoder,
    AttentionPooling,
    SequenceAttention,
    mechanisms,
    models,
    scores,
)
from keras_attn_rnn.generation import generate

# float32 on another backend: the same maths in another order of operations.
ATOL = 2e-5
GENERATE_STEPS = 5
B, T, S, D = 2, 5, 6, 4


def _floats(*shape, seed):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def _ids(shape, high, seed):
    ids = np.random.default_rng(seed).integers(1, high, shape).astype("int32")
    ids[1, shape[1] // 2 :] = 0  # a padded row: masks travel through the saved model
    return ids


def _randomized(model, seed=0):
    """Non-trivial weights (a zero-initialised bias or `v` would hide a loading bug)."""
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        weight.assign(rng.normal(0.0, 0.5, weight.shape).astype(weight.dtype))
    return model


def _score_case(score):
    query, keys = keras.Input((T, D)), keras.Input((S, D))
    return keras.Model([query, keys], score(query, keys)), [
        _floats(B, T, D, seed=1),
        _floats(B, S, D, seed=2),
    ]


def _pooling_case(**kwargs):
    sequence = keras.Input((S, D))
    mask = keras.Input((S,), dtype="bool")
    if kwargs.get("query") == "external":
        query = keras.Input((D,))
        pooled, weights = AttentionPooling(**kwargs)(
            [sequence, query], mask=mask, return_attention_scores=True
        )
        inputs = [sequence, mask, query]
        values = [_floats(B, S, D, seed=3), _mask(), _floats(B, D, seed=4)]
    else:
        pooled, weights = AttentionPooling(**kwargs)(
            sequence, mask=mask, return_attention_scores=True
        )
        inputs, values = [sequence, mask], [_floats(B, S, D, seed=3), _mask()]
    return keras.Model(inputs, [pooled, weights]), values


def _mask():
    mask = np.ones((B, S), bool)
    mask[1, 3:] = False
    return mask


def _sequence_attention_case(causal, **kwargs):
    h = keras.Input((S, D))
    mask = keras.Input((S,), dtype="bool")
    context, weights = SequenceAttention(**kwargs)(
        [h, h], mask=[mask, mask], use_causal_mask=causal, return_attention_scores=True
    )
    return keras.Model([h, mask], [context, weights]), [_floats(B, S, D, seed=5), _mask()]


def _decoder_case(cell, **kwargs):
    x, memory = keras.Input((T, 3)), keras.Input((S, D))
    mask = keras.Input((S,), dtype="bool")
    outputs, alignments = AttentionDecoder(cell, **kwargs)(
        [x, memory], mask=[None, mask], return_attention_scores=True
    )
    model = keras.Model([x, memory, mask], [outputs, alignments])
    return model, [_floats(B, T, 3, seed=6), _floats(B, S, D, seed=7), _mask()]


def cases():
    """name -> (model, inputs, `generate` keyword arguments or None when it does not generate)."""
    out = {}
    for name in scores.names():
        score = scores.get(name, **({"units": 5} if name == "additive" else {}))
        out[f"score_{name}"] = (*_score_case(score), None)
    out["score_additive_normalize"] = (*_score_case(scores.Additive(units=5, normalize=True)), None)
    out["pooling_learned"] = (*_pooling_case(), None)
    out["pooling_external_additive"] = (*_pooling_case(score="additive", query="external"), None)
    out["sequence_attention_causal_window"] = (
        *_sequence_attention_case(True, score="general", window=2),
        None,
    )
    out["sequence_attention_additive"] = (*_sequence_attention_case(False, score="additive"), None)
    out["decoder_lstm_bahdanau"] = (
        *_decoder_case(
            keras.layers.LSTMCell(5),
            score=scores.Additive(units=5, normalize=True),
            attention_layer_size=4,
        ),
        None,
    )
    out["decoder_gru_luong_stacked"] = (
        *_decoder_case(
            keras.layers.StackedRNNCells([keras.layers.GRUCell(4), keras.layers.GRUCell(4)]),
            score="general",
        ),
        None,
    )
    classifier = models.AttentiveClassifier(20, 3, embedding_dim=6, units=5)
    out["model_classifier"] = (classifier, _ids((B, 7), 20, seed=8), None)
    lm = models.AttentiveLanguageModel(13, embedding_dim=6, units=8, num_layers=2)
    out["model_language_model"] = (lm, _ids((B, 7), 13, seed=9), {})
    for decoder in ("bahdanau", "luong"):
        seq2seq = models.Seq2Seq(11, 9, embedding_dim=6, units=8, decoder=decoder)
        source, target = _ids((B, 6), 11, seed=10), _ids((B, 5), 9, seed=11)
        target[:, 0] = 1
        out[f"model_seq2seq_{decoder}"] = (seq2seq, [source, target], {"start_id": 1})
    # every stateful mechanism, through a model that also generates with it
    for mechanism in mechanisms.names():
        if mechanism == "content":
            continue
        seq2seq = models.Seq2Seq(
            11, 9, embedding_dim=6, units=8, attention={"mechanism": mechanism, "units": 5}
        )
        source, target = _ids((B, 6), 11, seed=12), _ids((B, 5), 9, seed=13)
        target[:, 0] = 1
        out[f"model_seq2seq_{mechanism}"] = (seq2seq, [source, target], {"start_id": 1})
    # copy attention: probabilities, alignments and p_gen over the extended vocabulary
    copier = models.Seq2Seq(11, 9, embedding_dim=6, units=8, copy=True, max_oov=2, unk_id=3)
    source, target = _ids((B, 6), 11, seed=14), _ids((B, 5), 9, seed=15)
    target[:, 0] = 1
    source_ext = source.copy()  # ids 9, 10 are outside the target vocabulary: numbered per row
    for row in source_ext:
        oovs = list(dict.fromkeys(row[row >= 9]))
        row[row >= 9] = [9 + oovs.index(word) for word in row[row >= 9]]
    out["model_seq2seq_copy"] = (
        copier,
        [source, target, source_ext],
        {"start_id": 1, "source_ext": source_ext.tolist()},
    )
    return out


def _outputs(model, inputs):
    return [np.asarray(ops.convert_to_numpy(y)) for y in keras.tree.flatten(model(inputs))]


def _prompts(inputs):
    return inputs[0] if isinstance(inputs, list) else [[3, 4], [5]]


def save(directory):
    arrays, saved = {}, {}
    for name, (model, inputs, generation) in cases().items():
        _outputs(model, inputs)  # builds every weight
        _randomized(model)
        model.save(os.path.join(directory, f"{name}.keras"))
        inputs_list = inputs if isinstance(inputs, list) else [inputs]
        for i, x in enumerate(inputs_list):
            arrays[f"{name}/in{i}"] = np.asarray(x)
        for i, y in enumerate(_outputs(model, inputs)):
            arrays[f"{name}/out{i}"] = y
        if generation is not None:
            result = generate(model, _prompts(inputs), GENERATE_STEPS, **generation)
            arrays[f"{name}/tokens"] = result.tokens
        saved[name] = {"list_inputs": isinstance(inputs, list), "generation": generation}
    np.savez(os.path.join(directory, "expected.npz"), **arrays)
    with open(os.path.join(directory, "cases.json"), "w") as f:
        json.dump({"backend": keras.backend.backend(), "cases": saved}, f)
    print(f"SAVED {len(saved)} cases on {keras.backend.backend()}")


def check(directory):
    with open(os.path.join(directory, "cases.json")) as f:
        saved = json.load(f)
    expected = np.load(os.path.join(directory, "expected.npz"))
    failures = 0
    for name, case in saved["cases"].items():
        try:
            model = keras.saving.load_model(
                os.path.join(directory, f"{name}.keras"), safe_mode=True
            )
            count = sum(key.startswith(f"{name}/in") for key in expected.files)
            inputs = [expected[f"{name}/in{i}"] for i in range(count)]
            inputs = inputs if case["list_inputs"] else inputs[0]
            outputs = _outputs(model, inputs)
            wanted = [expected[f"{name}/out{i}"] for i in range(len(outputs))]
            assert f"{name}/out{len(outputs)}" not in expected.files, "fewer outputs than saved"
            worst = 0.0
            for got, want in zip(outputs, wanted, strict=True):
                np.testing.assert_allclose(got, want, atol=ATOL, rtol=0)
                worst = max(worst, float(np.max(np.abs(got - want))))
            generation = case["generation"]
            if generation is not None:
                tokens = generate(model, _prompts(inputs), GENERATE_STEPS, **generation).tokens
                np.testing.assert_array_equal(tokens, expected[f"{name}/tokens"])
            print(f"OK {name} {worst:.2e}")
        except Exception:
            failures += 1
            message = traceback.format_exc(limit=3).strip().replace("\n", "\n    ")
            print(
                f"FAIL {name} (saved on {saved['backend']}, loaded on "
                f"{keras.backend.backend()}):\n    {message}"
            )
    return failures


if __name__ == "__main__":
    mode, directory = sys.argv[1], sys.argv[2]
    assert keras.backend.backend() == os.environ["KERAS_BACKEND"], keras.backend.backend()
    print(
        f"keras {keras.__version__} on {keras.backend.backend()}, keras_attn_rnn "
        f"{keras_attn_rnn.__version__}"
    )
    if mode == "save":
        save(directory)
    else:
        sys.exit(min(check(directory), 100))
