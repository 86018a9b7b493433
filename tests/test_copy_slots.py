"""The `copy_slots` task and the runner's copy attention, without training: the data (seeded,
held-out slot words unknown to the vocabulary), `model.copy` and `model.max_oov` in the config,
the splits each model is fed, the p_gen beside the attention, the text model's extended
encoding, and the SavedModel export a copying model refuses."""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest
from experiments_helpers import migrated_store, snapshot

from experiments import config as config_lib
from experiments.commands import main
from experiments.data import metrics
from experiments.data.modeling import GREEDY
from experiments.data.vocab import END, PAD, START, UNK
from experiments.errors import EXIT_CONFIG, ConfigError
from experiments.kinds.base import P_GEN_LABEL
from experiments.tasks import build_task
from experiments.tracking import model_logging, text_model
from experiments.training import run as training_run
from keras_attn_rnn import generation, losses

SMALL = {"name": "copy_slots", "num_examples": 300, "pool_size": 200, "num_probes": 2}
MODEL = {"embedding_dim": 8, "units": 8}


def _task(**changes):
    return build_task(config_lib.validate({"task": {**SMALL, **changes}}).task)


def _prepared(copy: bool, task=None, **model):
    return training_run.validate(
        {"task": task or SMALL, "model": {**MODEL, "copy": copy, **model}, "generate": {}}
    )


def _texts(task, split):
    """(source, target) texts of every row, unknown words included."""
    vocab = task.vocab
    return [
        (
            vocab.decode_extended(split.x_ext[i], split.words(i)),
            vocab.decode_extended(split.targets[i], split.words(i)),
        )
        for i in range(len(split))
    ]


def test_the_same_seed_makes_the_same_task_and_another_seed_another():
    a, b, c = _task(), _task(), _task(seed=1)
    assert a.vocab.tokens == b.vocab.tokens
    for name, split in a.splits().items():
        other = b.splits()[name]
        for field in ("x", "y", "x_dec", "x_ext", "alignment"):
            np.testing.assert_array_equal(getattr(split, field), getattr(other, field))
        assert split.oov == other.oov
    assert _texts(a, a.test) != _texts(c, c.test)
    assert _texts(a, a.train) != _texts(c, c.train)


def test_held_out_slot_words_are_in_no_training_row_and_unknown_to_the_vocabulary():
    task = _task()
    seen = {word for pair in _texts(task, task.train) for text in pair for word in text.split()}
    assert set(task.vocab.tokens[4:]) <= seen  # the vocabulary is made of training words
    for split in (task.val, task.test):
        for i, (source, target) in enumerate(_texts(task, split)):
            oov = split.words(i)
            assert oov, source  # every held-out row has a word to copy
            assert not set(oov) & seen, source
            assert not set(oov) & set(task.vocab.tokens)
            assert set(target.split()) - set(task.vocab.tokens) <= set(oov)  # all copyable
    counts = {}
    for source, target in _texts(task, task.train):
        for word in set(f"{source} {target}".split()):
            counts[word] = counts.get(word, 0) + 1
    assert {w for w, n in counts.items() if n >= 4} == set(task.vocab.tokens[4:])  # min_count
    assert task.max_oov == max(len(words) for s in task.splits().values() for words in s.oov)


def test_targets_rewrite_their_source_and_align_the_slot_words():
    task = _task()
    size = len(task.vocab)
    split = task.test
    shapes = set()
    for i, (source, target) in enumerate(_texts(task, split)):
        assert source != target
        shapes.add(" ".join("_" if w in split.words(i) else w for w in target.split()))
        words, ids = source.split(), split.y[i]
        n = int(metrics.target_lengths(split.y[i : i + 1])[0])
        assert ids[n] == END and (ids < size + len(split.words(i))).all()
        assert split.x_dec[i, 0] == START and (split.x_dec[i] < size).all()  # <unk> fed
        fed = np.where(ids[: n - 1] >= size, UNK, ids[: n - 1])
        np.testing.assert_array_equal(split.x_dec[i, 1:n], fed)
        for t, position in enumerate(split.alignment[i]):
            if position >= 0:
                assert words[position] == target.split()[t]
        copied = [t for t in target.split() if t in split.words(i)]
        assert copied and all(split.alignment[i, target.split().index(w)] >= 0 for w in copied)
    assert len({shape.split("_")[0] for shape in shapes}) >= 4  # several templates


def test_pools_too_small_for_the_held_out_rows_are_refused():
    with pytest.raises(ConfigError, match=r"task\.pool_size: got 8; expected pools whose"):
        _task(num_examples=2000, pool_size=8)
    with pytest.raises(ConfigError, match=r"task\.min_count: got 0"):
        _task(min_count=0)


def test_copy_and_max_oov_are_checked_with_the_task():
    with pytest.raises(
        ConfigError, match=r"model: .*expected model\.copy: true with model\.max_oov"
    ):
        config_lib.validate({"task": SMALL, "model": {"max_oov": 3}})
    needle = {"name": "needle", "num_examples": 64}
    with pytest.raises(ConfigError, match=r"model\.copy: got True; expected false for a class"):
        _prepared(True, needle)
    dates = {"name": "dates", "num_examples": 64}
    with pytest.raises(ConfigError, match=r"model\.copy: got True; .*one vocabulary"):
        _prepared(True, dates)
    most = _task().max_oov
    with pytest.raises(
        ConfigError, match=rf"model\.max_oov: got {most - 1}; expected at least {most}"
    ):
        _prepared(True, max_oov=most - 1)
    assert _prepared(True).cfg.model.max_oov == most  # the task's, when unset
    assert _prepared(True, max_oov=most + 2).cfg.model.max_oov == most + 2


def test_a_copying_model_is_fed_extended_ids_and_one_without_writes_unknown_words_unk():
    copying = _prepared(True)
    task, size = copying.task, len(copying.task.vocab)
    split = task.test
    assert len(split.inputs) == 3 and split.inputs[2] is split.x_ext
    assert (split.y >= size).any() and split.reference is None
    model = task.kind.build_model(copying.cfg, task)
    assert isinstance(task.kind.loss(model), losses.PointerGeneratorLoss)  # the model's choice
    assert model.copy and model.num_oov == task.max_oov and model.unk_id == UNK

    plain = _prepared(False)
    split = plain.task.test
    assert len(split.inputs) == 2 and not (split.y >= size).any()
    np.testing.assert_array_equal(split.targets, task.test.y)  # judged against the words
    plain_model = plain.task.kind.build_model(plain.cfg, plain.task)
    assert isinstance(plain.task.kind.loss(plain_model), keras.losses.SparseCategoricalCrossentropy)
    # writing <unk> for an unknown word is no match
    assert metrics.exact_match(split.y, split.y) == 1.0
    assert metrics.exact_match(split.targets, split.y) == 0.0  # every test row has one


def test_a_task_without_unknown_words_copies_its_own_source():
    prepared = _prepared(True, {"name": "reverse", "num_examples": 64, "num_probes": 1})
    split = prepared.task.train
    assert prepared.cfg.model.max_oov == 0
    np.testing.assert_array_equal(split.x_ext, split.x)
    assert split.oov == [()] * len(split) and len(split.inputs) == 3


def _copier(p_gen_bias=None):
    """The prepared copying task and its (untrained) model; with `p_gen_bias`, p_gen is
    `sigmoid(p_gen_bias)` everywhere (-30: the model only copies)."""
    prepared = _prepared(True)
    model = prepared.task.kind.build_model(prepared.cfg, prepared.task)
    model(list(prepared.task.probes.inputs))
    if p_gen_bias is not None:
        kernel, bias = model.p_gen.get_weights()
        model.p_gen.set_weights([np.zeros_like(kernel), np.full_like(bias, p_gen_bias)])
    return prepared, model


def test_a_copying_model_decodes_with_and_without_extended_sources_in_one_run():
    """Evaluation feeds `source_ext`; the expected output of the logged model (token ids
    alone) comes after it, from the same compiled generation function."""
    prepared, model = _copier()
    kind, split, cfg = prepared.task.kind, prepared.task.test, prepared.cfg
    length = cfg.generate.max_length
    with_ext = kind.decode(model, GREEDY, split.x, length, source_ext=split.x_ext)
    alone = kind.serving_output(model, cfg, split.x[:3])
    np.testing.assert_array_equal(
        alone, kind.decode(model, GREEDY, split.x[:3], length, source_ext=split.x[:3])
    )
    size = len(prepared.task.vocab)
    assert with_ext.shape == (len(split), length) and (alone < size).all()  # nothing to copy


def test_heatmaps_and_samples_show_p_gen_beside_the_attention():
    prepared, model = _copier()
    task = prepared.task
    probes = task.probes
    _, weights, p_gen = model(list(probes.inputs), return_attention_scores=True)
    heatmaps = task.kind.probe_heatmaps(model, task)
    for i, (_, kwargs) in enumerate(heatmaps):
        source = kwargs["source_tokens"]
        assert source[-1] == P_GEN_LABEL and set(probes.words(i)) <= set(source)  # words shown
        rows = kwargs["weights"]
        assert rows.shape == (len(kwargs["target_tokens"]), len(source))
        np.testing.assert_allclose(rows[:, -1], np.asarray(p_gen)[i, : len(rows)], atol=1e-5)
        attended = np.asarray(weights)[i, : len(rows), : len(source) - 1]
        np.testing.assert_allclose(rows[:, :-1], attended, atol=1e-6)
    plain = _prepared(False)
    untrained = plain.task.kind.build_model(plain.cfg, plain.task)
    untrained(list(plain.task.probes.inputs))
    for i, (_, kwargs) in enumerate(plain.task.kind.probe_heatmaps(untrained, plain.task)):
        assert P_GEN_LABEL not in kwargs["source_tokens"]
        assert set(plain.task.probes.words(i)) <= set(kwargs["source_tokens"])
        assert kwargs["weights"].shape[1] == len(kwargs["source_tokens"])


def test_samples_show_each_generated_token_with_its_p_gen():
    prepared, model = _copier(p_gen_bias=-30.0)  # copies only: every token a source word
    task = prepared.task
    rows = task.kind.sample_rows(model, task, prepared.cfg.generate, 3)
    assert [r["source"] for r in rows] == [s for s, _ in _texts(task, task.test)[:3]]
    assert [r["target"] for r in rows] == [t for _, t in _texts(task, task.test)[:3]]
    for row in rows:
        entries = [entry.rsplit(":", 1) for entry in row["p_gen"].split()]
        assert [word for word, _ in entries] == row["prediction"].split()
        assert {p for _, p in entries} == {"0.00"}
        assert set(row["prediction"].split()) <= set(row["source"].split())


def test_the_text_model_feeds_extended_ids_and_writes_the_copied_words():
    prepared, model = _copier(p_gen_bias=-30.0)  # copies only: every token a source word
    card = prepared.task.kind.text_card(prepared.task, prepared.cfg)
    assert card["copy"] == {"max_oov": prepared.cfg.model.max_oov}
    tokenizer = prepared.task.tokenizer
    for text, tokens in zip(card["examples"]["text"], card["examples"]["tokens"]):
        assert tokenizer.encode(text) == [t for t in tokens if t != PAD]
        assert set(tokenizer.encode_extended(text).oov) & set(text.split())  # words kept
    served = text_model.TextModel()
    served.card, served.codec, served.model = card, text_model.TextCodec(card), model
    texts = ["Zbigniew Quaybridge Zbigniew", "meet Ann at Oslo on friday"]
    records = served.predict(None, texts, params={"max_length": 6})
    encoded = [tokenizer.encode_extended(t, card["copy"]["max_oov"]) for t in texts]
    source = np.array([e.ids + [0] * (6 - len(e.ids)) for e in encoded], "int32")
    source_ext = np.array([e.extended + [0] * (6 - len(e.extended)) for e in encoded], "int32")
    expected = generation.generate(
        model, source, 6, eos_id=END, start_id=START, seed=0, source_ext=source_ext
    )
    size = len(prepared.task.vocab)
    for row, record in enumerate(records):
        ids = expected.tokens[row]
        assert record["tokens"] == prepared.task.vocab.labels(ids, encoded[row].oov)
        assert record["text"] == tokenizer.decode_extended(ids, encoded[row].oov)
        assert record["attended_tokens"] == texts[row].split()
        np.testing.assert_allclose(record["p_gen"], expected.p_gen[row], atol=1e-6)
        assert max(record["p_gen"]) < 1e-6
    assert (expected.tokens[0] >= size).all()  # only unknown words to copy: all extended
    assert set(records[0]["tokens"]) <= {"Zbigniew", "Quaybridge"}
    assert records[0]["text"].split() == records[0]["tokens"]


def test_the_keras_flavor_model_and_the_savedmodel_are_skipped_for_a_copying_model(
    tmp_path, monkeypatch, capsys
):
    card = {"copy": {"max_oov": 3}, "generate": {"max_length": 8}}
    reason = model_logging.keras_model_skipped(card)
    assert "copy" in reason and "source_ext" in reason
    assert model_logging.model_tags(card) == ("text_model_uri",)
    assert model_logging.skipped_note(card) == {"keras_model_skipped": reason}
    assert model_logging.keras_model_skipped({"generate": {}}) is None  # TensorFlow here
    assert model_logging.model_tags() == ("model_uri", "text_model_uri")
    # a run whose text model's card copies: export refuses a SavedModel, writes nothing
    import mlflow

    uri = migrated_store(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    client = mlflow.MlflowClient(uri)
    experiment = client.create_experiment("copy", artifact_location=str(tmp_path / "artifacts"))
    run = client.create_run(experiment)
    folder = tmp_path / "text_model" / "artifacts"
    folder.mkdir(parents=True)
    (folder / "card.json").write_text(json.dumps(card))
    (folder / "model.keras").write_bytes(b"not read")
    client.log_artifacts(run.info.run_id, str(tmp_path / "text_model"), "text_model")
    client.set_tag(run.info.run_id, "text_model_uri", f"runs:/{run.info.run_id}/text_model")
    before = snapshot(tmp_path / "out")
    assert main(["export", run.info.run_id, "--format", "savedmodel", str(tmp_path / "out")]) == (
        EXIT_CONFIG
    )
    err = capsys.readouterr().err
    assert "format: savedmodel takes token ids alone" in err and "copy attention" in err, err
    assert "--format keras" in err and "Received: format='savedmodel'" in err
    assert snapshot(tmp_path / "out") == before == {}
