"""Serving functions of a trained model: token ids in, generated ids (or logits) out.

`ServingModel` wraps a trained model of `keras_attn_rnn.models` and the text
card of its run (see `experiments.kinds.base.TaskKind.text_card`) in a
Keras model whose `call(tokens)` runs the compiled decoding loop of
`keras_attn_rnn.samplers` (the one `generation.generate` runs) with the
start/end ids and length of the card. Exported as a TensorFlow SavedModel it
needs neither this library nor the runner to load: that is the Keras-flavor
model of a run (MLflow's exported form) and `export --format savedmodel`.
"""

from __future__ import annotations

from pathlib import Path

import keras
from keras import ops

from experiments.tracking.text_model import card_sampler, classifies, output_vocabulary_size

# The input of every serving function: int32 token ids `(B, L)`, 0-padded on the right.
TOKENS_SPEC = keras.InputSpec(shape=(None, None), dtype="int32", name="tokens")


class ServingModel(keras.Model):
    """A trained model behind one serving function.

    Args:
        trained: the trained (built) task model.
        card: the run's text card (a dict): its `kind`, `start_id`, `end_id`,
            output vocabulary and `generate` defaults (`max_length`,
            `length_penalty`).
        sampler: `"greedy"` or `"beam"` (any name of `samplers.names()`
            whose sampler needs no seed works, but these two are the ones
            exported).
        beam_width: the beam width of `"beam"` (default: the card's).

    Call arguments:
        tokens: int `(B, L)` token ids, 0-padded on the right: the source for
            a seq2seq model, the prompt for a language model, the text for a
            classifier.

    Returns:
        `call`: int32 generated ids `(B, max_length)` (seq2seq, LM; 0 after
        the end id), or float32 logits `(B, classes)` (classification).
        `outputs` returns a dict: `tokens` and `scores` `(B,)` (summed
        log-probabilities, see `generation.GenerationResult`), or `logits`.
    """

    def __init__(self, trained, card: dict, sampler: str = "greedy", beam_width=None, **kwargs):
        super().__init__(**kwargs)
        self.trained = trained
        self.classifies = classifies(card)
        self.sampler_name = sampler
        if not self.classifies:
            options = card["generate"]
            self.max_length = int(options["max_length"])
            self.start_id, self.end_id = card.get("start_id"), card.get("end_id")
            # the card's value of every argument this sampler takes (`beam_width` overridden)
            chosen = {**options, "sampler": sampler}
            if beam_width is not None:
                chosen["num_beams"] = int(beam_width)
            self.sampler = card_sampler(chosen, output_vocabulary_size(card))
        self.built = True  # the trained model is built; nothing of its own to build

    def call(self, tokens):
        outputs = self.outputs(tokens)
        return outputs["logits"] if self.classifies else outputs["tokens"]

    def outputs(self, tokens) -> dict:
        """`{"tokens", "scores"}` (seq2seq, LM) or `{"logits"}` (classification)."""
        tokens = ops.cast(tokens, "int32")
        if self.classifies:
            return {"logits": ops.cast(self.trained(tokens, training=False), "float32")}
        generated, scores, _ = self.sampler(
            self.trained,
            tokens,
            max_length=self.max_length,
            start_id=self.start_id,
            eos_id=self.end_id,
            seed=ops.convert_to_tensor(0, "int32"),
        )
        return {"tokens": ops.cast(generated, "int32"), "scores": scores}


def export_savedmodel(trained, card: dict, path: Path, beam_width: int) -> None:
    """A TensorFlow SavedModel at `path` with endpoints `serve` (greedy) and `serve_beam`.

    Each endpoint (also a TF Serving signature; `serve` is `serving_default`)
    maps int32 `tokens (B, L)` to `{"tokens", "scores"}`; a classifier has
    `serve` only, to `{"logits"}`.
    """
    archive = keras.export.ExportArchive()
    greedy = ServingModel(trained, card)
    archive.track(greedy)
    archive.add_endpoint("serve", greedy.outputs, input_signature=[TOKENS_SPEC])
    if not classifies(card):
        beam = ServingModel(trained, card, sampler="beam", beam_width=beam_width)
        archive.add_endpoint("serve_beam", beam.outputs, input_signature=[TOKENS_SPEC])
    archive.write_out(str(path), verbose=False)
