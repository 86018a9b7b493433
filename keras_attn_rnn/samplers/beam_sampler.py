import keras
from keras import ops

from keras_attn_rnn import _compilation, serializable
from keras_attn_rnn.samplers.sampler import (
    IMPOSSIBLE,
    Sampler,
    check_int,
    check_number,
    without_early_eos,
    without_padding,
)


@serializable.register
class BeamSampler(Sampler):
    """Beam search: keeps the `num_beams` best partial sequences at every step.

    Follows tfa's `BeamSearchDecoder` (0.23) step by step. Each step, every
    candidate `beam + token` is ranked by its summed log-probability divided
    by the GNMT length penalty `((5 + length) / 6) ** length_penalty`, plus,
    for beams that had finished before this step, the GNMT coverage penalty
    `coverage_penalty_weight * coverage_penalty(acc)`, `acc` the beam's
    alignments summed over the steps it was running (see
    `coverage_penalty`). As in tfa, a candidate that emits `eos_id` is
    ranked with a length that does not count the EOS token, while the beam
    it becomes stores (and is later ranked with) the length that does;
    accumulated alignments start from the model's initial alignments when
    its cache holds them (`cache["initial_alignments"]`, `(B, S)`: tfa's
    initial attention state, one-hot at position 0 for monotonic
    mechanisms), else from zeros (tfa's for content mechanisms). The
    returned scores and order are those of the last step's ranking (tfa's
    final `scores`): beams that finished at that very step carry no coverage
    penalty and a length without their EOS. Deliberate differences: a real
    source word with exactly zero accumulated attention is penalized (tfa
    lets it off, see `coverage_penalty`), and beams are backtracked from the
    last step (tfa's `gather_tree` starts at the longest beam's length, so a
    row whose finished beams were re-ranked afterwards can pair one beam's
    tokens with another's score).

    The model's cache is repeated `num_beams` times along the batch axis
    and reordered as beams are chosen (by the model's `reorder_cache` where
    it has one: `Seq2Seq` leaves its encoder memory, the same for every beam
    of a source, where it is); sequences are recovered by one backtrack over
    the per-step parent pointers at the end (tfa's `gather_tree`), so no
    step reorders the history.

    Args:
        num_beams: number of beams (keras-hub's name; the older `beam_width=`
            still works, with a `DeprecationWarning`).
        length_penalty: `alpha` of the length penalty; `0` ranks by the plain
            sum of log-probabilities (tfa's default), which favours short
            outputs. The default, `1.0`, was chosen on real translations
            (1,200 English-French test pairs, a beam of 4): for a weak
            translator (greedy BLEU / chrF 11.9 / 19.0) `0` gave 8.6 / 17.8
            with outputs 40 % shorter than the references, `1.0` 12.1 / 20.8;
            for a good one (greedy 36.6 / 52.0) `0` gave 40.7 / 54.5, `0.6`
            40.9 / 54.9 and `1.0` 40.9 / 55.0, the references' length
            (`tools/length_penalty.py`, docs/results/real-text.md). With a
            penalty, `num_beams=1` can end later than greedy decoding: an
            EOS candidate is ranked with the shorter length.
        num_beams_returned: how many of the best beams to return (then
            `generate` returns `(B, n, max_length)` tokens, best first).
        coverage_penalty_weight: `beta` of the coverage penalty; `0` (the
            default) turns it off. Meant for sequence-to-sequence models,
            whose alignments cover the source: positions outside the
            cache's `memory_mask` (padding) do not count; without a mask
            every position does, so a language model's not yet written
            cache positions would be charged.

    Examples:
        >>> from keras_attn_rnn.generation import generate
        >>> from keras_attn_rnn.models import AttentiveLanguageModel
        >>> from keras_attn_rnn.samplers import BeamSampler
        >>> lm = AttentiveLanguageModel(vocabulary_size=20, units=8)
        >>> generate(lm, [[3, 4]], 5, sampler=BeamSampler(num_beams=4)).tokens.shape
        (1, 5)

    Reference:
        Wu et al., 2016, "Google's Neural Machine Translation System".
    """

    renamed_arguments = {"beam_width": "num_beams"}

    def __init__(
        self,
        num_beams=4,
        length_penalty=1.0,
        num_beams_returned=1,
        coverage_penalty_weight=0.0,
        **kwargs,
    ):
        unknown = sorted(set(kwargs) - set(self.renamed_arguments))
        if unknown:
            raise TypeError(f"BeamSampler got an unexpected keyword argument {unknown[0]!r}")
        if "beam_width" in kwargs:
            given = {"beam_width": kwargs["beam_width"]}
            # both given: an error, except num_beams=4, which cannot be told from the
            # default (the deprecated beam_width then wins, with its warning)
            if num_beams != 4:
                given["num_beams"] = num_beams
            num_beams = self.current_arguments(given)["num_beams"]
        self.check_arguments(
            {
                "num_beams": num_beams,
                "length_penalty": length_penalty,
                "num_beams_returned": num_beams_returned,
                "coverage_penalty_weight": coverage_penalty_weight,
            }
        )
        super().__init__()
        self.num_beams = int(num_beams)
        self.length_penalty = float(length_penalty)
        self.num_beams_returned = int(num_beams_returned)
        self.coverage_penalty_weight = float(coverage_penalty_weight)

    @property
    def beam_width(self):
        """Deprecated: `num_beams` (keras-hub's name)."""
        return self.num_beams

    @classmethod
    def check_arguments(cls, arguments, vocabulary_size=None):
        arguments = cls.current_arguments(arguments)
        num_beams = arguments.get("num_beams", 4)
        returned = arguments.get("num_beams_returned", 1)
        check_int("num_beams", num_beams, 1)
        check_int("num_beams_returned", returned, 1)
        if returned > num_beams:
            raise ValueError(
                f"num_beams_returned must be at most num_beams={num_beams}. "
                f"Received: num_beams_returned={returned!r}"
            )
        check_number("length_penalty", arguments.get("length_penalty", 1.0))
        weight = arguments.get("coverage_penalty_weight", 0.0)
        check_number("coverage_penalty_weight", weight)
        if weight < 0:
            raise ValueError(
                "coverage_penalty_weight must be >= 0 (0 turns the penalty off). "
                f"Received: coverage_penalty_weight={weight!r}"
            )

    def get_config(self):
        return {
            "num_beams": self.num_beams,
            "length_penalty": self.length_penalty,
            "num_beams_returned": self.num_beams_returned,
            "coverage_penalty_weight": self.coverage_penalty_weight,
        }

    def _penalty(self, lengths):
        return ops.power((5.0 + ops.cast(lengths, "float32")) / 6.0, self.length_penalty)

    def score(self, log_probs, lengths, accumulated, finished, mask=None):
        """Beam scores: `log_probs / length penalty` (+ the coverage penalty of finished beams).

        `log_probs`, `lengths`, `finished`: `(B, W)`; `accumulated`: `(B, W, S)`
        summed alignments; `mask`: bool, broadcastable to `accumulated`, True
        at real source positions (None: all are real).
        """
        scores = log_probs / self._penalty(lengths) if self.length_penalty else log_probs
        if self.coverage_penalty_weight == 0:
            return scores
        penalty = coverage_penalty(accumulated, mask)
        return scores + self.coverage_penalty_weight * penalty * ops.cast(finished, "float32")

    def __call__(
        self, model, prompts, max_length, start_id=None, eos_id=None, seed=0, min_length=None
    ):
        width = self.num_beams
        logits, weights, cache = model.init_cache(prompts, max_length, start_id=start_id)
        batch, vocab = ops.shape(logits)[0], ops.shape(logits)[1]
        source = ops.shape(weights)[-1]
        extras = cache if isinstance(cache, dict) else {}
        # Padding positions of the source never count in the coverage penalty.
        mask = extras.get("memory_mask")
        if mask is not None:
            mask = ops.reshape(ops.cast(mask, "bool"), (batch, 1, 1, source))
        covered = ops.zeros((batch, width, source), "float32")
        if self.coverage_penalty_weight and extras.get("initial_alignments") is not None:
            initial = ops.cast(extras["initial_alignments"], "float32")
            covered = covered + ops.reshape(initial, (batch, 1, source))

        def repeat(x):
            return ops.repeat(x, width, axis=0)

        beam_min_length = None if min_length is None else repeat(min_length)  # (B * W,)

        # A finished beam continues only with padding, at no cost.
        pad_only = ops.where(ops.equal(ops.arange(vocab), 0), 0.0, IMPOSSIBLE)
        # tfa: a candidate emitting EOS is ranked without counting it.
        if eos_id is None:
            adds_length = ops.ones((vocab,), "int32")
        else:
            adds_length = ops.cast(ops.not_equal(ops.arange(vocab), eos_id), "int32")
        # Only beam 0 is alive at first, so the first step expands one hypothesis.
        first = ops.concatenate([ops.zeros((1,)), ops.full((width - 1,), IMPOSSIBLE)])
        # The loop state, one name per entry from here to the end. Per step the records
        # keep each beam's token, parent beam and alignment; steps after the search
        # stopped keep tokens 0 and each beam its own parent.
        beams = {
            "step": ops.convert_to_tensor(0, "int32"),
            "logits": repeat(logits),  # of the next token, per beam (B * W, V)
            "weights": repeat(weights),  # the attention behind those logits
            "cache": keras.tree.map_structure(repeat, cache),
            "log_probs": ops.tile(ops.expand_dims(first, 0), (batch, 1)),  # (B, W) sums
            "tokens": _compilation.new_record(max_length, (batch, width), "int32"),
            "parents": ops.broadcast_to(
                ops.arange(width, dtype="int32"), (max_length, batch, width)
            ),
            "history": _compilation.new_record(max_length, (batch, width, source), "float32"),
            "lengths": ops.zeros((batch, width), "int32"),
            "covered": covered,  # (B, W, S) attention summed while running
            "scores": ops.zeros((batch, width), "float32"),  # the last step's ranking
            "finished": ops.zeros((batch, width), "bool"),
        }

        def cond(beams):
            return ops.logical_and(
                ops.less(beams["step"], max_length), ops.logical_not(ops.all(beams["finished"]))
            )

        def body(beams):
            step, finished, covered = beams["step"], beams["finished"], beams["covered"]
            attention = ops.reshape(ops.cast(beams["weights"], "float32"), (batch, width, source))
            running = ops.logical_not(finished)
            if self.coverage_penalty_weight:
                # tfa: the alignments behind this step's logits count for beams still running
                covered = covered + attention * ops.expand_dims(ops.cast(running, "float32"), -1)
            step_logits = without_padding(beams["logits"])
            if min_length is not None and eos_id is not None:
                step_logits = without_early_eos(step_logits, step, beam_min_length, eos_id)
            step_log_probs = ops.log_softmax(step_logits, axis=-1)
            step_log_probs = ops.reshape(step_log_probs, (batch, width, vocab))
            step_log_probs = ops.where(ops.expand_dims(finished, -1), pad_only, step_log_probs)
            candidates = ops.expand_dims(beams["log_probs"], -1) + step_log_probs
            candidate_lengths = ops.expand_dims(beams["lengths"], -1) + adds_length * (
                ops.expand_dims(ops.cast(running, "int32"), -1)
            )
            ranked = self.score(
                candidates,
                candidate_lengths,
                ops.expand_dims(covered, 2),
                ops.expand_dims(finished, -1),
                mask,
            )
            scores, best = ops.top_k(ops.reshape(ranked, (batch, width * vocab)), width)
            parent = ops.cast(best // vocab, "int32")
            token = ops.cast(best % vocab, "int32")
            log_probs = ops.take_along_axis(
                ops.reshape(candidates, (batch, width * vocab)), best, 1
            )
            parent_finished = ops.take_along_axis(finished, parent, axis=1)
            # The stored length counts the EOS token (tfa's `next_prediction_len`).
            lengths = ops.take_along_axis(beams["lengths"], parent, axis=1) + ops.cast(
                ops.logical_not(parent_finished), "int32"
            )
            finished = parent_finished
            if eos_id is not None:
                finished = ops.logical_or(finished, ops.equal(token, eos_id))

            rows = ops.broadcast_to(ops.expand_dims(parent, -1), (batch, width, source))
            kept = ops.take_along_axis(attention, rows, axis=1)
            kept = ops.where(ops.expand_dims(parent_finished, -1), 0.0, kept)
            if self.coverage_penalty_weight:
                covered = ops.take_along_axis(covered, rows, axis=1)
            cache = reorder_cache(model, beams["cache"], parent)
            logits, weights, cache = model.next_logits(ops.reshape(token, (-1,)), cache)
            return {
                "step": step + 1,
                "logits": logits,
                "weights": weights,
                "cache": cache,
                "log_probs": log_probs,
                "tokens": _compilation.write_record(beams["tokens"], step, token),
                "parents": ops.slice_update(
                    beams["parents"], [step, 0, 0], ops.expand_dims(parent, 0)
                ),
                "history": _compilation.write_record(beams["history"], step, kept),
                "lengths": lengths,
                "covered": covered,
                "scores": scores,
                "finished": finished,
            }

        beams = ops.while_loop(cond, body, beams, maximum_iterations=max_length)
        # tfa: the last step's ranking, best first, is the final order and score.
        returned = self.num_beams_returned
        order = ops.broadcast_to(ops.arange(returned, dtype="int32"), (batch, returned))
        tokens, history = _backtrack(
            _compilation.stack_record(beams["tokens"]),
            beams["parents"],
            _compilation.stack_record(beams["history"]),
            order,
        )
        scores = beams["scores"][:, :returned]
        if returned == 1:
            return tokens[:, 0], scores[:, 0], history[:, 0]
        return tokens, scores, history


def reorder_cache(model, cache, parents):
    """The beams' cache after a step chose `parents` int `(B, W)` (each new beam's parent
    among its row's `W` beams): `model.reorder_cache(cache, parents)` where the model has
    it, else `gather_beams` of the whole cache."""
    if hasattr(model, "reorder_cache"):
        return model.reorder_cache(cache, parents)
    return gather_beams(cache, parents)


def gather_beams(cache, parents):
    """Every tensor of `cache` (rows `b * W + w`, beam after beam) with row `b * W + w`
    taken from row `b * W + parents[b, w]`; `parents` int `(B, W)`."""
    batch, width = ops.shape(parents)
    offsets = ops.arange(batch, dtype="int32")[:, None] * width
    rows = ops.reshape(ops.cast(parents, "int32") + offsets, (-1,))
    return keras.tree.map_structure(lambda x: ops.take(x, rows, axis=0), cache)


# Floor of `min(acc, 1)` before the log of the coverage penalty: a real source
# position never attended costs `log(1e-10) ~ -23` instead of `-inf`.
COVERAGE_EPSILON = 1e-10


def coverage_penalty(accumulated, mask=None):
    """GNMT's `sum_i log(max(min(acc_i, 1), 1e-10))` over the real source positions `i`.

    `accumulated`: `(..., S)` summed alignments; `mask`: bool broadcastable to
    it, True at real positions (None: all real) -> `(...)`; 0 when every
    real position got a total weight of at least 1.

    The one deliberate difference from tfa: tfa maps `acc_i == 0` to 1 (no
    penalty), to skip padding, so a real word that got exactly zero attention
    goes unpunished there; here padding is skipped by the mask and a real
    word with zero attention costs `log(COVERAGE_EPSILON)`.
    """
    covered = ops.log(ops.maximum(ops.minimum(accumulated, 1.0), COVERAGE_EPSILON))
    if mask is not None:
        covered = ops.where(mask, covered, 0.0)
    return ops.sum(covered, axis=-1)


def _backtrack(tokens, parents, history, beams):
    """Follows parent pointers from the last step back to the first (tfa's `gather_tree`).

    `tokens`, `parents`: `(T, B, W)`; `history`: `(T, B, W, S)`; `beams`: `(B, n)`
    chosen beams at the last step. Returns `(B, n, T)` tokens and `(B, n, T, S)`
    alignments, gathered once after the walk.
    """
    steps = ops.shape(tokens)[0]

    def body(i, carry):
        beams, chosen = carry
        t = steps - 1 - i
        chosen = ops.slice_update(chosen, [t, 0, 0], ops.expand_dims(beams, 0))
        return ops.take_along_axis(parents[t], beams, 1), chosen

    chosen = ops.zeros((steps, *ops.shape(beams)), "int32")
    _, chosen = ops.fori_loop(0, steps, body, (beams, chosen))  # (T, B, n) beam per step
    out_tokens = ops.take_along_axis(tokens, chosen, axis=2)
    rows = ops.broadcast_to(
        ops.expand_dims(chosen, -1), (*ops.shape(chosen), ops.shape(history)[-1])
    )
    out_history = ops.take_along_axis(history, rows, axis=2)
    return ops.transpose(out_tokens, (1, 2, 0)), ops.transpose(out_history, (1, 2, 0, 3))
