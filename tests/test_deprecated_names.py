"""The old spellings of issue 49 keep working for a release: as keywords and in the old
positional order with a DeprecationWarning naming the new spelling, as attributes, and
silently in configs (old `.keras` files); nothing in the project uses them. And the forms
`attention=` takes are the same for `Seq2Seq` and `AttentionDecoder`."""

import os
import warnings

import keras
import pytest
from experiments_helpers import TINY, TINY_TASKS, write_text_dataset

from experiments import config as config_lib
from experiments.training import run
from keras_attn_rnn import AttentionDecoder, copying, mechanisms, models
from keras_attn_rnn.generators import KerasAttentionGenerator
from keras_attn_rnn.preprocessors import (
    CausalLMPreprocessor,
    ClassifierPreprocessor,
    Seq2SeqPreprocessor,
)
from keras_attn_rnn.tokenizers import (
    CharTokenizer,
    SentencePieceTokenizer,
    VocabularyTokenizer,
    WordTokenizer,
)

SAVED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "saved_models")
OURS = ".*is deprecated in keras_attn_rnn"  # the library's own (SQLAlchemy's say "and will")


def _words():
    tokenizer = WordTokenizer()
    tokenizer.adapt(["a b c", "c b a d"])
    return tokenizer


def _generator(**sizes):
    return KerasAttentionGenerator(
        keras.layers.Embedding(11, 4),
        keras.layers.Embedding(9, 4),
        keras.layers.LSTM(4, return_sequences=True),
        keras.layers.Attention(),
        keras.layers.Dense(9),
        **sizes,
    )


def _sizes(generator):
    return generator.prompt_vocab_size, generator.output_vocab_size


# (the call with old keywords, the call with new ones, the old spelling, the new one,
# what to compare)
KEYWORDS = {
    "classifier": (
        lambda: models.AttentiveClassifier(vocab_size=11, num_classes=3, units=4),
        lambda: models.AttentiveClassifier(vocabulary_size=11, num_classes=3, units=4),
        "vocab_size",
        "vocabulary_size",
        lambda m: m.get_config(),
    ),
    "language_model": (
        lambda: models.AttentiveLanguageModel(vocab_size=11, units=4),
        lambda: models.AttentiveLanguageModel(vocabulary_size=11, units=4),
        "vocab_size",
        "vocabulary_size",
        lambda m: m.get_config(),
    ),
    "seq2seq": (
        lambda: models.Seq2Seq(source_vocab=11, target_vocab=9, units=4),
        lambda: models.Seq2Seq(source_vocabulary_size=11, target_vocabulary_size=9, units=4),
        "source_vocab",
        "source_vocabulary_size",
        lambda m: m.get_config(),
    ),
    "generator": (
        lambda: _generator(source_vocab_size=12, target_vocab_size=10),
        lambda: _generator(source_vocabulary_size=12, target_vocabulary_size=10),
        "source_vocab_size",
        "source_vocabulary_size",
        _sizes,
    ),
    "seq2seq_preprocessor": (
        lambda: Seq2SeqPreprocessor(_words(), source_length=3, target_length=2),
        lambda: Seq2SeqPreprocessor(_words(), source_sequence_length=3, target_sequence_length=2),
        "source_length",
        "source_sequence_length",
        lambda p: (p.source_sequence_length, p.target_sequence_length),
    ),
    "vocabulary_tokenizer": (
        lambda: VocabularyTokenizer(max_tokens=3, max_vocabulary=9),
        lambda: VocabularyTokenizer(sequence_length=3, vocabulary_size=9),
        "max_tokens",
        "sequence_length",
        lambda t: t.get_config(),
    ),
    "word_tokenizer": (  # a subclass: the mapping is inherited
        lambda: WordTokenizer(max_vocabulary=9),
        lambda: WordTokenizer(vocabulary_size=9),
        "max_vocabulary",
        "vocabulary_size",
        lambda t: t.get_config(),
    ),
    "extended_vocab_size": (
        lambda: copying.extended_vocab_size(vocab_size=5, num_oov=2),
        lambda: copying.extended_vocab_size(vocabulary_size=5, num_oov=2),
        "vocab_size",
        "vocabulary_size",
        lambda n: n,
    ),
}


def _names_only(config):
    """A config without its auto-generated layer name."""
    return {key: value for key, value in config.items() if key != "name"}


@pytest.mark.parametrize("case", sorted(KEYWORDS))
def test_an_old_keyword_works_and_warns_naming_the_new_one(case):
    old, new, old_name, new_name, compare = KEYWORDS[case]
    with pytest.warns(DeprecationWarning, match=f"`{old_name}` is deprecated.*use `{new_name}`"):
        built = old()
    expected = compare(new())
    found = compare(built)
    if isinstance(found, dict):
        found, expected = _names_only(found), _names_only(expected)
    assert found == expected


@pytest.mark.parametrize(
    "build, expected",
    [
        (
            lambda: models.AttentiveClassifier(11, 3, 6, "gru", 4),
            {"embedding_dim": 6, "rnn": "gru", "units": 4},
        ),
        (
            lambda: models.AttentiveLanguageModel(11, 6, 4, "gru"),
            {"embedding_dim": 6, "units": 4, "rnn": "gru"},
        ),
        (
            lambda: models.Seq2Seq(11, 9, 6, 4, "gru", True),
            {"embedding_dim": 6, "units": 4, "rnn": "gru", "bidirectional": True},
        ),
        (
            lambda: Seq2SeqPreprocessor(_words(), None, 3, 2),
            {"source_sequence_length": 3, "target_sequence_length": 2},
        ),
        (lambda: ClassifierPreprocessor(_words(), 5, ["n", "p"]), {"sequence_length": 5}),
        (lambda: CausalLMPreprocessor(_words(), 7), {"sequence_length": 7}),
        (
            lambda: VocabularyTokenizer(None, "whitespace", None, " ", True),
            {"split": "whitespace", "joiner": " ", "lowercase": True},
        ),
        (lambda: WordTokenizer(None, r"\w+"), {"pattern": r"\w+"}),
        (
            lambda: SentencePieceTokenizer(None, 300, "bpe"),
            {"vocabulary_size": 300, "model_type": "bpe"},
        ),
    ],
)
def test_options_passed_by_position_in_the_old_order_still_work_and_warn(build, expected):
    with pytest.warns(DeprecationWarning, match=r"by position is deprecated.*pass (it|them) by"):
        built = build()
    config = built.get_config()
    assert {key: config[key] for key in expected} == expected


def test_too_many_positional_arguments_and_two_spellings_of_one_are_refused():
    with pytest.raises(TypeError, match=r"takes at most 10 positional arguments"):
        models.AttentiveClassifier(11, 3, 6, "gru", 4, True, 1, None, 0.0, None, "extra")
    with pytest.raises(TypeError, match=r"`vocab_size` \(deprecated\) and `vocabulary_size`"):
        models.AttentiveClassifier(11, 3, vocab_size=11)
    with pytest.raises(TypeError, match=r"multiple values for argument 'embedding_dim'"):
        models.AttentiveClassifier(11, 3, 6, embedding_dim=6)


def test_the_old_attribute_names_read_the_new_ones_with_a_warning():
    model = models.Seq2Seq(11, 9, units=4)
    tokenizer = VocabularyTokenizer(sequence_length=3, vocabulary_size=9)
    preprocessor = Seq2SeqPreprocessor(_words(), target_sequence_length=2)
    for value, old, expected in [
        (model, "target_vocab", 9),
        (models.AttentiveLanguageModel(11, units=4), "vocab_size", 11),
        (tokenizer, "max_tokens", 3),
        (tokenizer, "max_vocabulary", 9),
        (preprocessor, "target_length", 2),
    ]:
        with pytest.warns(DeprecationWarning, match=f"`{old}` is deprecated"):
            assert getattr(value, old) == expected


def test_a_config_with_the_old_keys_loads_silently_and_is_written_back_with_the_new_ones():
    configs = [
        (
            models.Seq2Seq,
            models.Seq2Seq(11, 9, units=4),
            {"source_vocabulary_size": "source_vocab"},
        ),
        (
            models.AttentiveClassifier,
            models.AttentiveClassifier(11, 3, units=4),
            {"vocabulary_size": "vocab_size"},
        ),
        (
            CharTokenizer,
            CharTokenizer(sequence_length=4, vocabulary_size=7),
            {"sequence_length": "max_tokens", "vocabulary_size": "max_vocabulary"},
        ),
        (
            Seq2SeqPreprocessor,
            Seq2SeqPreprocessor(_words(), source_sequence_length=3),
            {"source_sequence_length": "source_length"},
        ),
    ]
    for cls, built, renames in configs:
        config = built.get_config()
        old = {renames.get(key, key): value for key, value in config.items()}
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            again = cls.from_config(old)
        assert again.get_config() == config


def test_an_old_file_is_saved_again_under_the_new_names():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = keras.saving.load_model(os.path.join(SAVED, "seq2seq_text.keras"))
    config = model.get_config()
    assert (config["source_vocabulary_size"], config["target_vocabulary_size"]) == (9, 12)
    preprocessor = config["preprocessor"]["config"]
    assert (preprocessor["source_sequence_length"], preprocessor["target_sequence_length"]) == (
        4,
        6,
    )
    tokenizer = preprocessor["tokenizer"]["config"]
    assert (tokenizer["sequence_length"], tokenizer["vocabulary_size"]) == (5, 9)
    assert not {"source_vocab", "source_length", "max_tokens", "max_vocabulary"} & {
        *config,
        *preprocessor,
        *tokenizer,
    }


@pytest.mark.parametrize("name", sorted(TINY_TASKS))
def test_the_runner_builds_each_ready_model_without_an_old_name(name, tmp_path):
    task = dict(TINY_TASKS[name])
    if "path" in task:
        task["path"] = str(write_text_dataset(tmp_path))
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=OURS, category=DeprecationWarning)
        prepared = run.validate(config_lib.validate({"task": task, **TINY}))
        model = prepared.task.kind.build_model(prepared.cfg, prepared.task)
    assert model.units == TINY["model"]["units"]


def test_seq2seq_and_the_decoder_take_a_name_a_dict_or_a_mechanism():
    location = {"mechanism": "location", "units": 5, "filters": 3, "kernel_size": 3}
    by_dict = models.Seq2Seq(11, 9, units=4, attention=location).get_config()["attention"]
    by_instance = models.Seq2Seq(
        11, 9, units=4, attention=mechanisms.LocationSensitiveAttention(5, filters=3, kernel_size=3)
    ).get_config()["attention"]
    # the instance's config holds its defaults too
    assert {key: by_instance[key] for key in by_dict} == by_dict
    assert (
        models.Seq2Seq.from_config(
            models.Seq2Seq(11, 9, units=4, attention=by_instance).get_config()
        ).attention
        == models.Seq2Seq(11, 9, units=4, attention=by_instance).attention
    )
    by_name = models.Seq2Seq(11, 9, units=4, attention="monotonic").get_config()["attention"]
    assert by_name["mechanism"] == "monotonic"

    cell = keras.layers.LSTMCell(4)
    (mechanism,) = AttentionDecoder(cell, attention=location).mechanisms
    assert isinstance(mechanism, mechanisms.LocationSensitiveAttention)
    assert (mechanism.units, mechanism.filters) == (5, 3)
    (content,) = AttentionDecoder(cell, attention={"score": "general"}).mechanisms
    assert isinstance(content, mechanisms.ContentAttention) and content.score == "general"
    (named,) = AttentionDecoder(cell, attention="monotonic").mechanisms
    assert isinstance(named, mechanisms.MonotonicAttention)
