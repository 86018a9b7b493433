"""`seq2seq`: source sequence -> target sequence, from `Seq2Seq` (Bahdanau or Luong)."""

from __future__ import annotations

import numpy as np
from sacrebleu.metrics import BLEU

from experiments.data import metrics, modeling, text_scores
from experiments.data import split as split_lib
from experiments.data.modeling import GREEDY
from experiments.data.vocab import END, SPECIALS, START, UNK
from experiments.errors import invalid_config
from experiments.kinds import register
from experiments.kinds.base import Artifacts, TaskKind, generate_defaults
from experiments.peers import keras_seq2seq
from keras_attn_rnn import models

BLEU_ORDER = 4  # sacrebleu's n-grams, 1 to 4

# Sources decoded at once when a split is scored.
EVAL_BATCH = 512


def _prompts_per_batch(sampler) -> int:
    """How many prompts a batch of the test split's decoding holds: `EVAL_BATCH` rows of
    the model's batch, of which beam search gives each prompt one per beam. Beam search
    over 512 prompts at once (2,048 rows) took the plain-Keras peer's run 133 MB above
    where it began (GNU pairs, batch 512; docs/results/real-text.md), a peak its training
    had never needed."""
    return max(1, EVAL_BATCH // getattr(sampler, "num_beams", 1))


def bleu_tokenize(task) -> str:
    """sacrebleu's tokenisation of the task's BLEU: `char` where its targets are strings of
    characters (every token of its output vocabulary one character), on which `13a` makes
    each whole target one word, so that BLEU, needing 4-grams of words, is 0 even for a
    perfect model; else the task's own (`13a`, or what `pairs`' `task.bleu_tokenize`
    chose)."""
    tokens = [t for t in task.output_vocab.tokens if t not in SPECIALS]
    if task.bleu_tokenize == "13a" and tokens and all(len(t) == 1 for t in tokens):
        return "char"
    return task.bleu_tokenize


def bleu_applies(references, tokenize: str) -> bool:
    """Whether corpus BLEU can mean anything on `references`: it multiplies the precisions of
    1- to 4-grams, so the median reference must hold 4 tokens in sacrebleu's `tokenize`
    (the `addition` task's answers, 3 or 4 characters, do not: no BLEU there)."""
    split = BLEU(tokenize=tokenize).tokenizer
    lengths = sorted(len(split(text).split()) for text in references)
    return bool(lengths) and lengths[len(lengths) // 2] >= BLEU_ORDER


@register
class Seq2Seq(TaskKind):
    """Encoder RNN -> attention decoder, trained with teacher forcing.

    With `model.copy` the model is a pointer-generator (`Seq2Seq(copy=True)`): it is fed
    each source in extended ids too (`Split.x_ext`), trains with
    `losses.PointerGeneratorLoss` on targets in extended ids, generates extended ids, and
    everything it writes is decoded through each row's unknown words (`Split.oov`).
    Without it, a task's unknown target words are `<unk>` to train on, but decodings are
    still judged against the words themselves (`split.without_copy`).
    """

    name = "seq2seq"
    model_type = "Seq2Seq"
    default_score = "additive"
    metric_names = ("token_accuracy", "exact_match_greedy")
    primary_metric = "test_exact_match_greedy"

    # the decoder is the library's (or the peer's); no pooling query
    unused_keys = ("model.attention.query", "model.attention.query_value")
    # what the plain-Keras peer does not read: it has Keras's own attention layer
    # (`keras.layers.Attention`: a dot score, softmax) and one `tanh` layer of `model.units`
    peer_unused_keys = ("model.attention_layer_size", "model.max_oov")
    peer_score = "dot"  # keras.layers.Attention's

    takes_mechanism = True  # the decoder takes any mechanism of the library's registry
    heatmap_rows = "target token (decoder step)"  # the y-axis of its heatmaps
    # decoding starts at `<s>` and stops at `</s>` (not before `min_length` tokens); a copying
    # model reads `source_ext` (default: the prompts, as the library's)
    decode_ids = {"start_id": START, "eos_id": END}
    has_coverage = True
    copies = True

    def resolve(self, cfg, task):
        """Also `model.max_oov`, when copying and unset: the most unknown words a source of the
        task holds."""
        cfg = super().resolve(cfg, task)
        if cfg.model.copy and cfg.model.max_oov is None:
            cfg.model.max_oov = task.max_oov
        return cfg

    def prepare(self, cfg, task):
        """The splits fed with their extended sources and targets when copying (a task
        without them: the source as its own, with one vocabulary), else without."""
        if not cfg.model.copy:
            size = len(task.output_vocab)
            return task.with_splits(lambda split: split_lib.without_copy(split, size))
        if task.vocab.tokens != task.output_vocab.tokens:
            raise invalid_config(
                "model.copy",
                cfg.model.copy,
                f"false for task {task.name!r}: a copied source word becomes a target id, "
                "which needs one vocabulary for the source and the target (a task with "
                "a shared vocabulary: task.shared_vocabulary where it has the key)",
            )
        if cfg.model.max_oov < task.max_oov:
            raise invalid_config(
                "model.max_oov",
                cfg.model.max_oov,
                f"at least {task.max_oov}, the most unknown words one source of task "
                f"{task.name!r} holds (or unset)",
            )
        return task.with_splits(split_lib.with_copy)

    def score(self, cfg):
        """The configured score or the default; the peer's own, Keras's dot score."""
        if cfg.model.decoder == keras_seq2seq.NAME:
            return self.peer_score
        return super().score(cfg)

    def applies(self, key, cfg):
        """Also: the peer reads none of the attention's keys but its (dot) score."""
        if cfg.model.decoder == keras_seq2seq.NAME:
            attention = key.startswith("model.attention.") and key != "model.attention.score"
            if attention or key in self.peer_unused_keys:
                return False
        return super().applies(key, cfg)

    def check(self, cfg):
        super().check(cfg)
        peer = cfg.model.decoder == keras_seq2seq.NAME
        if peer and (
            cfg.model.copy
            or cfg.model.bidirectional
            or cfg.model.attention.mechanism != "content"
            or cfg.train.coverage_loss_weight
            or cfg.train.alignment_loss_weight
        ):
            raise invalid_config(
                "model.decoder",
                cfg.model.decoder,
                "bahdanau or luong for copy attention, a bidirectional encoder, a mechanism or "
                "the attention losses (the plain-Keras peer has Keras's own layers: a "
                "one-directional encoder and keras.layers.Attention)",
            )
        if cfg.model.num_layers != 1:
            raise invalid_config(
                "model.num_layers",
                cfg.model.num_layers,
                "1 for a seq2seq task (its encoder and decoder have one RNN layer each)",
            )

    def attention(self, cfg):
        """Score, units, normalizer, and the mechanism with its options (`model.attention`'s
        other keys)."""
        a = cfg.model.attention
        return {**super().attention(cfg), "mechanism": a.mechanism, **a.model_extra}

    def build_model(self, cfg, task):
        m = cfg.model
        if m.decoder == keras_seq2seq.NAME:  # the plain-Keras peer: Keras's own layers
            return keras_seq2seq.build(
                len(task.vocab),
                len(task.output_vocab),
                embedding_dim=m.embedding_dim,
                units=m.units,
                rnn=m.rnn,
                dropout=m.dropout,
            )
        return models.Seq2Seq(
            source_vocabulary_size=len(task.vocab),
            target_vocabulary_size=len(task.output_vocab),
            bidirectional=self.bidirectional(cfg),
            decoder=m.decoder,
            attention=self.attention(cfg),
            attention_layer_size=m.attention_layer_size or "auto",
            embedding_dim=m.embedding_dim,
            units=m.units,
            rnn=m.rnn,
            dropout=m.dropout,
            **({"copy": True, "max_oov": m.max_oov, "unk_id": UNK} if m.copy else {}),
        )

    def task_metrics(self, model, task, split, predictions):
        """Teacher-forced token accuracy, and exact match of greedy decoding (both against
        `split.targets`: an unknown word written `<unk>` is wrong)."""
        return {
            "token_accuracy": metrics.token_accuracy(split.targets, predictions),
            "exact_match_greedy": self.exact_match(model, GREEDY, split),
        }

    #: per length bucket also the oracle-length exact match (see `exact_match_oracle`)
    length_metric_names = ("exact_match_oracle", "alignment_accuracy")
    length_plot_metrics = ("exact_match_oracle",)

    def length_metrics(self, model, task, split):
        """`evaluate` and `exact_match_oracle`."""
        out = self.evaluate(model, task, split)
        return {**out, "exact_match_oracle": self.exact_match_oracle(model, split)}

    def test_metrics(self, model, task, split, gen_cfg):
        """`evaluate` and `exact_match_oracle`; BLEU and chrF of the greedy decodings against
        the targets as written (`text_scores`: sacrebleu, on detokenised strings) and
        `copy_baseline_chrf` (the sources themselves as the translation: the cheapest
        reference point for a chrF); with `generate.sampler: beam` also the exact match,
        BLEU and chrF of beam search (the sampling strategies are random: no test figure).
        Keeps the decoded texts for `final_artifacts`."""
        self._decodings = {}  # each sampler's decoding of the split, once
        try:
            out = self.length_metrics(model, task, split)
            texts = text_scores.SplitTexts.of(task, split)
            texts.tokenize = bleu_tokenize(task)  # characters: sacrebleu's `char`
            decoders = [("greedy", GREEDY, 0)]
            if gen_cfg.sampler_name == "beam":
                decoders.append(("beam", gen_cfg.built_sampler, gen_cfg.seed))
            for name, sampler, seed in decoders:
                decoded = self._decoded(model, sampler, split, seed)
                if name != "greedy":
                    out[f"exact_match_{name}"] = metrics.exact_match(split.targets, decoded)
                out |= texts.score(name, decoded)
            self.test_texts = texts
        finally:
            self._decodings = None
        if not bleu_applies(texts.references, texts.tokenize):  # chrF and exact match only
            out = {k: v for k, v in out.items() if not k.startswith("bleu_")}
        return out | texts.copy_baseline()

    def final_artifacts(self, model, task, split):
        """The test split's texts as `test_metrics` scored them (`SplitTexts.files`) and
        sacrebleu's signatures of the scores."""
        texts = getattr(self, "test_texts", None)
        if texts is None:
            return Artifacts()
        signatures = text_scores.signatures(texts.tokenize)
        if not bleu_applies(texts.references, texts.tokenize):
            del signatures["bleu"]  # no BLEU logged
        return Artifacts(texts=texts.files(), dicts={"text/sacrebleu_signatures.json": signatures})

    def exact_match(self, model, sampler, split, seed=0) -> float:
        """Exact match of `split` decoded with `sampler` (built), up to the split's target
        length."""
        return metrics.exact_match(split.targets, self._decoded(model, sampler, split, seed))

    def _decoded(self, model, sampler, split, seed=0):
        """`split` decoded with `sampler` up to its target length (once per sampler while
        `test_metrics` runs)."""
        memo = getattr(self, "_decodings", None)
        key = (id(split), id(sampler), seed)
        if memo is not None and key in memo:
            return memo[key]
        decoded = self.decode(
            model,
            sampler,
            split.x,
            split.targets.shape[1],
            batch_size=_prompts_per_batch(sampler),
            seed=seed,
            **_copy_inputs(split),
        )
        if memo is not None:
            memo[key] = decoded
        return decoded

    def exact_match_oracle(self, model, split) -> float:
        """Exact match of greedy decoding with the output length given: `</s>` is impossible
        before each row's target length, and the output ends there (the "oracle length" of
        Newman et al., 2020, "The EOS Decision and Length Extrapolation"). Beside
        `exact_match_greedy` it tells a model that gets the tokens right but stops at the
        wrong place from one that gets the tokens wrong."""
        lengths = metrics.target_lengths(split.targets)
        decoded = self.decode(
            model,
            GREEDY,
            split.x,
            max(1, int(lengths.max(initial=0))),
            batch_size=EVAL_BATCH,
            min_length=lengths,
            **_copy_inputs(split),
        )
        return metrics.exact_match(split.targets, metrics.cut_to_lengths(decoded, lengths))

    def decode_length(self, task, gen_cfg):
        """`generate.max_length`, else the task's target length."""
        return gen_cfg.max_length or task.val.y.shape[1]

    def sample_rows(self, model, task, gen_cfg, count):
        """Source, target, prediction and whether they match, for the first `count` test rows;
        for a copying model also each generated token with its `p_gen` (1: generated from the
        vocabulary, 0: copied from the source)."""
        if count == 0:
            return []
        split = task.test.take(slice(0, count))
        result = modeling.generated(
            model,
            gen_cfg.built_sampler,
            split.x,
            self.decode_length(task, gen_cfg),
            seed=gen_cfg.seed,
            **_copy_inputs(split),
            **self.decode_ids,
        )
        tokens, p_gen = np.asarray(result.tokens), getattr(result, "p_gen", None)
        vocab, rows = task.output_vocab, []
        for i in range(len(split)):
            words = split.words(i)
            target = vocab.decode_extended(split.targets[i], words)
            prediction = vocab.decode_extended(tokens[i], words)
            row = {
                "source": text_scores.source_text(task, split, i),
                "target": target,
                "prediction": prediction,
                "correct": target == prediction,
            }
            if p_gen is not None:
                steps = int(metrics.target_lengths(tokens[i : i + 1])[0])
                labels = vocab.labels(tokens[i, :steps], words)
                row["p_gen"] = " ".join(
                    f"{label}:{float(p):.2f}" for label, p in zip(labels, np.asarray(p_gen)[i])
                )
            rows.append(row)
        return rows

    def heatmap(self, task, i, source, logits, weights):
        probes = task.probes
        words = probes.words(i)
        targets = task.output_vocab.labels(probes.targets[i], words)
        target_text = task.output_vocab.decode_extended(probes.targets[i], words)
        text = f"{text_scores.source_text(task, probes, i)} -> {target_text}"
        return weights[: len(targets), : len(source)], source, targets, f"probe {i}: {_short(text)}"

    def card_fields(self, task, cfg):
        """The target vocabulary; decoding starts at `<s>`, stops at `</s>`; with copying,
        `copy`: the extended vocabulary's size beyond it (`max_oov`)."""
        fields = {
            "output": task.output_vocab.card(),
            "start_id": START,
            "end_id": END,
            "generate": generate_defaults(cfg),
            "attends_generated": False,  # each step attends over the source
        }
        if cfg.model.copy:
            fields["copy"] = {"max_oov": int(cfg.model.max_oov)}
        if cfg.model.decoder == keras_seq2seq.NAME:
            fields["peer"] = keras_seq2seq.NAME  # Keras's own model: decoded by the generator
        return fields

    def tokens_per_epoch(self, split):
        """Source and target tokens."""
        return super().tokens_per_epoch(split) + split.count_tokens("y")


def _copy_inputs(split) -> dict:
    """What decoding `split` passes besides the sources: a copying model's `source_ext` (the
    extended sources), nothing for any other model."""
    return {"source_ext": split.x_ext} if split.copying else {}


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
