"""`StepModel`: the step API that `generation.generate` and the samplers decode."""

from typing import Protocol


class StepModel(Protocol):
    """A model that decodes one token at a time, its state carried in a cache.

    `generation.generate(model, ...)` and every sampler take any object with
    these members (the ready models, the generators, a test's fake model);
    nothing needs to subclass this.

    Attributes:
        output_vocab_size: the number of ids a step scores.
        prompt_vocab_size: optional; the number of ids a prompt may hold
            (default `output_vocab_size`).
        is_seq2seq: optional, default False; True for a model whose prompts
            are sources: `start_id` is then required and prompts are not
            compacted.

    A copy model (`Seq2Seq(copy=True)`) also has `copy = True`, `num_oov`
    (the extended ids beyond `output_vocab_size`) and
    `copy_probabilities(source, tokens, start_id)` (`p_gen` behind each
    generated token); its steps score `output_vocab_size + num_oov` ids.

    Beam search repeats the cache `num_beams` times along the batch axis and
    reorders it as beams are selected: every tensor is gathered along the
    batch axis, unless the model has `reorder_cache(cache, parents)`
    (`parents` int `(B, num_beams)`, each new beam's parent among its row's
    beams), which may leave alone what is the same for every beam of a row
    (an encoder's memory). Its coverage penalty reads two optional
    entries of a dict cache: `memory_mask` `(B, S)` bool (True at real source
    positions; without it every position is real) and `initial_alignments`
    `(B, S)` (the alignments before the first step, where accumulated
    attention starts; zeros without it).
    """

    output_vocab_size: int

    def init_cache(self, prompts, max_length, start_id=None):
        """Runs the prompts (or encodes the source) once.

        Args:
            prompts: int `(B, P)`.
            max_length: the number of tokens that will be generated.
            start_id: the first decoder input, or an id prepended to the
                prompts.

        Returns:
            logits: float32 `(B, V)`, of the first generated token.
            weights: its attention weights `(B, S)`.
            cache: a nest of tensors whose leading axis is the batch.
        """

    def next_logits(self, token, cache):
        """One step on a `(B,)` int32 token: `(logits (B, V), weights (B, S), cache)`."""
