"""A keras-hub user's habits (issue 49, items 2 and 3): strings wherever a preprocessor is
attached (`fit`, `evaluate`, `predict`, `generate`, `tf.data` datasets of strings), clear
errors where strings or arguments make no sense, and keras-hub's spellings (sampler
`"random"`, `BeamSampler(num_beams=...)`, `generate(stop_token_ids=..., strip_prompt=...)`,
callable tokenizers, `id_to_token` / `token_to_id` / `get_vocabulary`).

docs/guides/text.md lists where this API still differs from keras-hub's; the tests named
`test_difference_*` pin those differences, so the list stays true."""

import warnings

import keras
import numpy as np
import pytest

from experiments.tracking import text_model
from keras_attn_rnn import models, preprocessors, samplers, tokenizers

pytestmark = pytest.mark.layers

WORDS = ["the", "cat", "dog", "sat", "on", "a", "mat"]
SOURCES = ["the cat sat", "a dog sat on a mat", "the dog", "a cat on the mat"]
TARGETS = [" ".join(reversed(s.split())) for s in SOURCES]
LABELS = ["cat", "other", "other", "cat"]


def words():
    tokenizer = tokenizers.WordTokenizer()
    tokenizer.adapt(SOURCES)
    return tokenizer


def translator(**kwargs):
    preprocessor = preprocessors.Seq2SeqPreprocessor(words(), target_length=5)
    model = models.Seq2Seq(units=4, embedding_dim=4, preprocessor=preprocessor, **kwargs)
    model.compile()
    return model


def language_model():
    chars = tokenizers.CharTokenizer()
    chars.adapt(SOURCES)
    preprocessor = preprocessors.CausalLMPreprocessor(chars, sequence_length=12)
    model = models.AttentiveLanguageModel(units=4, embedding_dim=4, preprocessor=preprocessor)
    model.compile()
    return model


def classifier():
    preprocessor = preprocessors.ClassifierPreprocessor(words(), labels=["cat", "other"])
    model = models.AttentiveClassifier(units=4, embedding_dim=4, preprocessor=preprocessor)
    model.compile()
    return model


def tf_data():
    return pytest.importorskip("tensorflow").data


# ---------------------------------------------------------------- a keras-hub user's script


def test_a_keras_hub_users_script_runs_unchanged():
    """The calls of keras-hub's guides, spelt as there, on tiny models."""
    tokenizer = words()
    ids = tokenizer("the cat sat")  # a tokenizer is called on text
    assert ids == tokenizer.encode("the cat sat") and len(ids) == 3
    assert tokenizer(["the cat", "a dog"]) == [ids[:2], tokenizer.encode("a dog")]
    assert [tokenizer.id_to_token(i) for i in ids] == ["the", "cat", "sat"]
    assert [tokenizer.token_to_id(t) for t in ("the", "cat", "sat")] == ids
    assert tokenizer.detokenize([tokenizer.id_to_token(i) for i in ids]) == "the cat sat"
    assert tokenizer.get_vocabulary()[:4] == ["<pad>", "<s>", "</s>", "<unk>"]
    assert len(tokenizer.get_vocabulary()) == tokenizer.vocabulary_size

    lm = language_model()
    lm.compile(sampler="random")  # keras-hub's name
    assert isinstance(lm.sampler, samplers.RandomSampler)
    lm.compile(sampler=samplers.BeamSampler(num_beams=2))
    assert lm.sampler.num_beams == 2
    lm.compile(sampler="greedy")
    with_prompt = lm.generate("the", max_length=4, stop_token_ids=None)
    alone = lm.generate("the", max_length=4, stop_token_ids=None, strip_prompt=True)
    assert with_prompt == "the" + alone  # the prompt, then what strip_prompt keeps
    both = lm.generate(["the", "a"], max_length=3, strip_prompt=True)
    assert isinstance(both, list) and len(both) == 2

    model = translator()
    model.compile(sampler="beam")
    assert isinstance(model.generate(["the cat"], max_length=4)[0], str)


# ---------------------------------------------------------------- item 2: strings everywhere


def test_seq2seq_predict_scores_string_pairs_and_refuses_sources_alone():
    model = translator()
    logits = model.predict((SOURCES[:2], TARGETS[:2]), verbose=0)
    x, _, _ = model.preprocessor(SOURCES[:2], TARGETS[:2])
    np.testing.assert_allclose(logits, model.predict(x, verbose=0), rtol=1e-5, atol=1e-6)
    for sources in (SOURCES[:2], np.array(SOURCES[:2]), SOURCES[0]):
        with pytest.raises(ValueError, match=r"x=\(sources, targets\).*generate.*Received: x="):
            model.predict(sources, verbose=0)


@pytest.mark.slow  # ~16 s: fit, evaluate and predict each compile
def test_seq2seq_fit_evaluate_predict_take_datasets_of_string_pairs():
    data = tf_data()
    model = translator()
    pairs = data.Dataset.from_tensor_slices((SOURCES, TARGETS)).batch(2)
    history = model.fit(pairs, validation_data=pairs, epochs=1, verbose=0)
    assert set(history.history) >= {"loss", "val_loss"}
    loss, _ = model.evaluate(pairs, verbose=0)
    x, y, _ = model.preprocessor(SOURCES, TARGETS)
    np.testing.assert_allclose(loss, model.evaluate(x, y, batch_size=2, verbose=0)[0], rtol=1e-5)
    assert model.predict(pairs, verbose=0).shape[:2] == (4, 6)  # target + </s>
    with pytest.raises(ValueError, match=r"x=\(sources, targets\).*Received: x="):
        model.predict(data.Dataset.from_tensor_slices(SOURCES).batch(2), verbose=0)


@pytest.mark.slow  # ~18 s: two models fitted
def test_a_classifier_and_a_language_model_take_datasets_of_strings():
    data = tf_data()
    clf = classifier()
    clf.fit(data.Dataset.from_tensor_slices((SOURCES, LABELS)).batch(2), epochs=1, verbose=0)
    texts = data.Dataset.from_tensor_slices(SOURCES).batch(3)
    np.testing.assert_allclose(
        clf.predict(texts, verbose=0), clf.predict(SOURCES, verbose=0), rtol=1e-5, atol=1e-6
    )
    lm = language_model()
    lm.fit(data.Dataset.from_tensor_slices(SOURCES).batch(2), epochs=1, verbose=0)
    assert lm.predict(["the cat"], verbose=0).shape[:2] == (1, 8)  # <s> + 7 characters


def test_predict_takes_a_dataset_of_strings():
    data = tf_data()
    clf = classifier()
    texts = data.Dataset.from_tensor_slices(SOURCES).batch(3)  # batches of 3 and 1
    np.testing.assert_allclose(
        clf.predict(texts, verbose=0), clf.predict(SOURCES, verbose=0), rtol=1e-5, atol=1e-6
    )


def test_an_unbatched_dataset_of_strings_is_refused():
    data = tf_data()
    with pytest.raises(ValueError, match=r"must be batched.*dataset.batch\(n\).*Received:"):
        translator().fit(data.Dataset.from_tensor_slices((SOURCES, TARGETS)), verbose=0)


def test_strings_without_a_preprocessor_name_the_fix():
    model = models.Seq2Seq(source_vocab=12, target_vocab=12, units=4)
    model.compile()
    fix = r"preprocessor=keras_attn_rnn.preprocessors.Seq2SeqPreprocessor\(...\), or pass token"
    with pytest.raises(ValueError, match=fix + r".*Received: x=\['the cat'\]"):
        model.fit(["the cat"], ["cat the"], verbose=0)
    with pytest.raises(ValueError, match=fix):
        model.evaluate(np.array(["the cat"]), ["cat the"], verbose=0)
    with pytest.raises(ValueError, match=r"preprocessor.*Received: preprocessor=None"):
        model.generate(["the cat"])
    clf = models.AttentiveClassifier(vocab_size=12, num_classes=2, units=4)
    with pytest.raises(ValueError, match=r"ClassifierPreprocessor.*Received: x=\['the cat'\]"):
        clf.predict(["the cat"], verbose=0)
    dataset = tf_data().Dataset.from_tensor_slices((["the cat"], [0])).batch(1)
    with pytest.raises(ValueError, match=r"only with a preprocessor.*Received: x="):
        clf.fit(dataset, verbose=0)


@pytest.mark.parametrize(
    "inputs, shown",
    [(None, "None"), ([], r"\[\]"), ({"prompts": ["the cat"]}, r"\{'prompts'")],
)
def test_generate_refuses_what_is_neither_strings_nor_ids(inputs, shown):
    with pytest.raises(ValueError, match=r"inputs must be a string.*or token ids.*Received: "):
        translator().generate(inputs)
    with pytest.raises(ValueError, match=rf"Received: inputs={shown}"):
        language_model().generate(inputs)


def test_generate_refuses_a_dataset_naming_its_batches():
    dataset = tf_data().Dataset.from_tensor_slices(["the cat"]).batch(1)
    with pytest.raises(ValueError, match=r"not a tf.data.Dataset.*as_numpy_iterator.*Received:"):
        translator().generate(dataset)


def test_generate_reads_bytes_as_utf8_text():
    model = translator()
    expected = model.generate("the cat", max_length=3)
    assert model.generate(b"the cat", max_length=3) == expected
    assert model.generate([b"the cat"], max_length=3) == [expected]
    assert model.generate(np.array([b"the cat"]), max_length=3) == [expected]
    with pytest.raises(ValueError, match=r"UTF-8.*Received: sources\[0\]=b'\\xff'"):
        model.generate([b"\xff"])


def test_ids_take_the_preprocessors_start_and_end_ids():
    model = translator()
    ids = model.preprocessor.generate_preprocess(["the cat", "a dog"])
    default = model.generate(ids)  # no start_id: the preprocessor's
    given = model.generate(ids, 6, start_id=1, eos_id=2)
    np.testing.assert_array_equal(default.tokens, given.tokens)  # and its max_length: 5 + 1


@pytest.mark.parametrize("max_length", [0, -1, 2.5, True])
def test_generate_refuses_a_bad_max_length_instead_of_the_default(max_length):
    pattern = rf"max_length must be an integer >= 1. Received: max_length={max_length!r}"
    with pytest.raises(ValueError, match=pattern.replace(".", r"\.")):
        translator().generate(["the cat"], max_length=max_length)
    with pytest.raises(ValueError, match=r"Received: max_length="):
        translator().generate([[4, 6]], max_length=max_length)


def test_a_classifier_neither_generates_nor_takes_a_sampler():
    model = classifier()
    with pytest.raises(ValueError, match=r"does not generate.*predict.*Received: inputs=\['x'\]"):
        model.generate(["x"])
    with pytest.raises(ValueError, match=r"leave sampler out. Received: sampler='beam'"):
        model.compile(sampler="beam")
    model.compile()
    assert model.sampler is None and "sampler" not in model.get_compile_config()


def test_a_classifier_saved_with_a_sampler_still_loads(tmp_path):
    """Before, compile() gave every model the greedy sampler: such files must load."""
    model = classifier()
    model(np.ones((1, 3), "int32"))
    model.sampler = samplers.get("greedy")  # as compile() set it then
    path = str(tmp_path / "clf.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.sampler is None
    np.testing.assert_allclose(
        loaded.predict(SOURCES, verbose=0), model.predict(SOURCES, verbose=0)
    )


# ---------------------------------------------------------------- item 3: keras-hub's spellings


def test_random_is_the_sampler_name_and_sample_a_deprecated_alias():
    assert "random" in samplers.names() and "sample" not in samplers.names()
    assert isinstance(samplers.get("random", temperature=0.5), samplers.RandomSampler)
    with pytest.warns(DeprecationWarning, match=r"'sample' is deprecated: use 'random'"):
        sampler = samplers.get("sample", temperature=0.5)
    assert isinstance(sampler, samplers.RandomSampler) and sampler.temperature == 0.5
    with pytest.warns(DeprecationWarning):
        assert samplers.arguments("sample") == samplers.arguments("random")


def test_beam_sampler_takes_num_beams_and_beam_width_is_deprecated():
    sampler = samplers.BeamSampler(num_beams=3)
    assert sampler.num_beams == 3 and sampler.get_config()["num_beams"] == 3
    assert "beam_width" not in sampler.get_config()
    assert samplers.BeamSampler(2).num_beams == 2  # first positional, as in keras-hub
    with pytest.warns(DeprecationWarning, match=r"beam_width is deprecated: use num_beams"):
        old = samplers.BeamSampler(beam_width=3)
    assert old.get_config() == sampler.get_config()
    with pytest.warns(DeprecationWarning, match="beam_width"):
        by_name = samplers.get("beam", beam_width=3)
    assert by_name.get_config() == sampler.get_config()
    with pytest.warns(DeprecationWarning):  # a config saved before the rename
        saved = samplers.deserialize({**samplers.serialize(sampler), "config": {"beam_width": 3}})
    assert saved.num_beams == 3
    with pytest.raises(
        ValueError, match=r"num_beams must be an integer >= 1. Received: num_beams=0"
    ):
        samplers.BeamSampler(num_beams=0)
    with pytest.raises(ValueError, match=r"num_beams or the deprecated beam_width, not both"):
        samplers.BeamSampler(num_beams=2, beam_width=3)


def test_stop_token_ids_auto_none_or_one_id():
    lm = language_model()
    end = lm.preprocessor.tokenizer.end_id
    prompts = [[1, 4]]
    auto = lm.generate(prompts, 6, seed=0)  # "auto": the preprocessor's end id
    np.testing.assert_array_equal(auto.tokens, lm.generate(prompts, 6, eos_id=end).tokens)
    never = lm.generate(prompts, 6, stop_token_ids=None)
    assert never.tokens.shape == (1, 6) and np.all(never.tokens != 0)  # no stop: 6 tokens
    one = lm.generate(prompts, 6, stop_token_ids=(5,))
    np.testing.assert_array_equal(one.tokens, lm.generate(prompts, 6, eos_id=5).tokens)
    with pytest.raises(ValueError, match=r"one token id.*Received: stop_token_ids=\(2, 5\)"):
        lm.generate(prompts, 6, stop_token_ids=(2, 5))
    with pytest.raises(ValueError, match=r"give one. Received: stop_token_ids=\[5\], eos_id=2"):
        lm.generate(prompts, 6, stop_token_ids=[5], eos_id=2)
    with pytest.raises(ValueError, match=r"strip_prompt must be True or False. Received: "):
        lm.generate(["the"], strip_prompt="yes")


def test_strip_prompt_does_not_change_a_seq2seq_answer():
    model = translator()
    assert model.generate(["the cat"], max_length=4, strip_prompt=True) == model.generate(
        ["the cat"], max_length=4
    )


def test_tokenizer_lookups_refuse_what_is_not_in_the_vocabulary():
    tokenizer = words()
    size = tokenizer.vocabulary_size
    with pytest.raises(ValueError, match=rf"id must be an integer in \[0, {size}\). Received: id"):
        tokenizer.id_to_token(size)
    with pytest.raises(ValueError, match=r"token must be a token of the vocabulary.*'bird'"):
        tokenizer.token_to_id("bird")
    with pytest.raises(ValueError, match=r"inputs must hold strings only. Received: inputs\[0\]"):
        tokenizer([1, 2])


def test_difference_tokenize_gives_tokens_and_vocabulary_size_is_a_property():
    """The differences docs/guides/text.md lists: `tokenize` / `detokenize` work on token
    strings (the ids are `tokenizer(text)` / `encode` and `decode`), and `vocabulary_size`
    is a property, not a method."""
    tokenizer = words()
    assert tokenizer.tokenize("the cat") == ["the", "cat"]
    assert tokenizer.detokenize(["the", "cat"]) == "the cat"
    assert tokenizer.decode(tokenizer("the cat")) == "the cat"
    assert isinstance(tokenizer.vocabulary_size, int)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        samplers.get("random")  # the new name does not warn


def test_served_params_read_the_deprecated_beam_width():
    """A served text model declares `num_beams` and, for older clients, `beam_width`;
    MLflow fills both in with the card's value, so the one a request changed wins."""
    card = text_model.current_names({"sampler": "beam", "num_beams": 4, "beam_width": 4})
    assert card == {"sampler": "beam", "num_beams": 4}
    filled = {"sampler": "beam", "num_beams": 4, "beam_width": 4}
    assert text_model.requested({**filled, "beam_width": 2}, card)["num_beams"] == 2
    assert text_model.requested({**filled, "num_beams": 3}, card)["num_beams"] == 3
    assert text_model.requested({"beam_width": 2}, card) == {"num_beams": 2}  # not filled
    assert "beam_width" not in text_model.requested(filled, card)
    with pytest.raises(Exception, match=r"num_beams or the deprecated beam_width, not both"):
        text_model.requested({**filled, "num_beams": 3, "beam_width": 2}, card)
