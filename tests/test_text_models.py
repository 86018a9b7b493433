"""The ready models with a preprocessor: strings in and out (`fit`, `evaluate`, `predict`,
`generate`), `compile()` defaults, and a `.keras` file that gives the same strings in a
fresh process, on every backend."""

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
from helpers import ROOT

from keras_attn_rnn import losses, models, preprocessors, samplers, tokenizers

pytestmark = pytest.mark.layers

WORDS = ["the", "cat", "dog", "sat", "ran", "on", "a", "mat", "log", "big", "red"]


def pairs(count=64, seed=0):
    rng = np.random.default_rng(seed)
    sources = [" ".join(rng.choice(WORDS, rng.integers(2, 5))) for _ in range(count)]
    return sources, [" ".join(reversed(s.split())) for s in sources]


def text_models():
    """A tiny Seq2Seq, language model and classifier, each with its preprocessor,
    trained for a few steps on strings."""
    sources, targets = pairs()
    subwords = tokenizers.SentencePieceTokenizer(vocabulary_size=300, model_type="bpe")
    subwords.adapt(sources)
    seq2seq = models.Seq2Seq(
        units=8,
        embedding_dim=8,
        preprocessor=preprocessors.Seq2SeqPreprocessor(subwords, target_sequence_length=6),
    )
    seq2seq.compile(optimizer=keras.optimizers.Adam(0.01), sampler="beam")
    seq2seq.fit(sources, targets, epochs=2, batch_size=32, verbose=0)

    chars = tokenizers.CharTokenizer()
    chars.adapt(sources)
    lm = models.AttentiveLanguageModel(
        units=8,
        embedding_dim=8,
        preprocessor=preprocessors.CausalLMPreprocessor(chars, sequence_length=24),
    )
    lm.compile(optimizer=keras.optimizers.Adam(0.01))
    lm.fit(sources, epochs=1, batch_size=32, verbose=0)

    words = tokenizers.WordTokenizer()
    words.adapt(sources)
    labels = ["cat" if "cat" in s else "other" for s in sources]
    classifier = models.AttentiveClassifier(
        units=8,
        embedding_dim=8,
        preprocessor=preprocessors.ClassifierPreprocessor(words, labels=["cat", "other"]),
    )
    classifier.compile(optimizer=keras.optimizers.Adam(0.01))
    classifier.fit(sources, labels, epochs=2, batch_size=32, verbose=0)
    return seq2seq, lm, classifier


@pytest.mark.slow  # ~15-40 s; `make test-slow` runs this file on TensorFlow, JAX and PyTorch
def test_models_with_preprocessors_take_and_give_strings(tmp_path):
    seq2seq, lm, classifier = text_models()
    sources, targets = pairs(8, seed=1)
    # compile("auto"): the masked losses, accuracy, and the sampler generate uses
    assert isinstance(seq2seq.loss, keras.losses.SparseCategoricalCrossentropy)
    assert isinstance(seq2seq.sampler, samplers.BeamSampler)
    translations = seq2seq.generate(sources)
    assert len(translations) == 8 and all(isinstance(t, str) for t in translations)
    assert isinstance(seq2seq.generate(sources[0]), str)
    # ids in: the generation result, as generation.generate gives it
    ids = seq2seq.preprocessor.generate_preprocess(sources)
    result = seq2seq.generate(ids, 7, start_id=1, eos_id=2, sampler="greedy")
    assert result.tokens.shape == (8, 7)
    loss, accuracy = seq2seq.evaluate(sources, targets, verbose=0)
    assert np.isfinite(loss) and 0 <= accuracy <= 1
    # a language model continues each prompt
    continued = lm.generate(["the ca", "a d"], max_length=5)
    assert continued[0].startswith("the ca") and continued[1].startswith("a d")
    assert all(len(text) <= len(prompt) + 5 for text, prompt in zip(continued, ["the ca", "a d"]))
    # the classifier predicts on texts
    logits = classifier.predict(sources, verbose=0)
    assert logits.shape == (8, 2)

    # saved, then loaded in a fresh process: the same strings and logits
    for name, model in (("seq2seq", seq2seq), ("lm", lm), ("classifier", classifier)):
        model.save(os.path.join(tmp_path, f"{name}.keras"))
    expected = {
        "seq2seq": translations,
        "lm": continued,
        "classifier": logits.tolist(),
    }
    script = textwrap.dedent(
        f"""
        import json, numpy as np, keras
        import keras_attn_rnn
        path = {str(tmp_path)!r}
        load = lambda name: keras.saving.load_model(f"{{path}}/{{name}}.keras", safe_mode=True)
        sources = {sources!r}
        seq2seq, lm, classifier = load("seq2seq"), load("lm"), load("classifier")
        print(json.dumps({{
            "seq2seq": seq2seq.generate(sources),
            "lm": lm.generate(["the ca", "a d"], max_length=5),
            "classifier": classifier.predict(sources, verbose=0).tolist(),
            "sampler": type(seq2seq.sampler).__name__,
        }}))
        """
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert got["seq2seq"] == expected["seq2seq"]
    assert got["lm"] == expected["lm"]
    assert got["sampler"] == "BeamSampler"
    np.testing.assert_allclose(got["classifier"], expected["classifier"], atol=1e-5)


def test_compile_auto_picks_the_copy_loss_and_sizes_come_from_the_preprocessor():
    tokenizer = tokenizers.WordTokenizer()
    tokenizer.adapt(["a b c"])
    preprocessor = preprocessors.Seq2SeqPreprocessor(tokenizer)
    copier = models.Seq2Seq(units=4, copy=True, preprocessor=preprocessor)
    assert (
        copier.source_vocabulary_size == copier.target_vocabulary_size == tokenizer.vocabulary_size
    )
    copier.compile()
    assert isinstance(copier.loss, losses.PointerGeneratorLoss)
    assert isinstance(copier.optimizer, keras.optimizers.Adam)
    with pytest.raises(
        ValueError, match=r"target_vocabulary_size must match the preprocessor's \(7\)"
    ):
        models.Seq2Seq(target_vocabulary_size=9, preprocessor=preprocessor)
    with pytest.raises(ValueError, match=r"source_vocabulary_size is required \(or a preprocessor"):
        models.Seq2Seq()
    with pytest.raises(ValueError, match=r"preprocessor must be a .*Seq2SeqPreprocessor"):
        models.Seq2Seq(preprocessor=preprocessors.CausalLMPreprocessor(tokenizer))
    with pytest.raises(ValueError, match=r"takes strings only with a preprocessor"):
        models.Seq2Seq(11, 9, units=4).generate(["a b"])
