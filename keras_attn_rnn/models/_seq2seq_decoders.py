"""`Seq2Seq`'s two decoder arrangements, one object each; `KINDS` maps `decoder=` to them.

A kind makes its layers (`layers`: attribute name -> layer; the model owns them under
those names, which its saved `.keras` files use as the weights' paths) and runs them:
`decode` over a whole target (teacher forcing), `initial_cache` and `step` for
generation. The model chooses its kind once, in its constructor.

`decode` and `step` also return the features that the generation probability of
`Seq2Seq(copy=True)` (the pointer-generator) reads, `[s_t; c_t]`: each step's decoder
output and context (or attention vector). A kind built with `copy=True` may arrange its
outputs for it.
"""

import keras
from keras import ops

from keras_attn_rnn.layers import AttentionDecoder, SequenceAttention
from keras_attn_rnn.models import _utils
from keras_attn_rnn.stepping import AttentionDecoderStep, _ops


class InputFeeding:
    """`decoder="bahdanau"`: an `AttentionDecoder` with input feeding: attention is taken at
    every step from the new cell output, and the previous attention vector is fed back into
    the cell's input. Takes every mechanism. With `copy` the decoder outputs
    `[cell_output; attention]` (`output_attention="both"`, as See et al.'s `V [s_t; h*_t]`):
    the output layer and the generation probability read both."""

    # the entries of the cache that no step changes: the decoder step's memory
    fixed_entries = AttentionDecoderStep.fixed_entries

    @staticmethod
    def check_options(options):
        pass

    def __init__(self, rnn, units, options, defaults, attention_layer_size, dtype, copy=False):
        self.attention_decoder = AttentionDecoder(
            _utils.make_cell(rnn, units, "decoder_cell", dtype),
            attention=_utils.make_mechanism(
                options, defaults, units, dtype, f"{options['mechanism']}_attention"
            ),
            attention_layer_size=attention_layer_size,
            output_attention="both" if copy else True,
            input_feeding=True,
            return_sequences=True,
            dtype=dtype,
            name="attention_decoder",
        )
        self.layers = {"attention_decoder": self.attention_decoder}
        self._step = AttentionDecoderStep(self.attention_decoder)

    def decode(self, y, target_mask, memory, memory_mask, states, training):
        """`(outputs (B, T, d), alignments (B, T, S), features)` of the whole target; the
        features of the generation probability are the outputs."""
        outputs, alignments = self.attention_decoder(
            [y, memory],
            mask=[target_mask, memory_mask],
            initial_state=states,
            training=training,
            return_attention_scores=True,
        )
        return outputs, alignments, outputs

    def initial_cache(self, memory, memory_mask, states):
        """The decoder's step state (`AttentionDecoderStep.initial_cache`)."""
        return self._step.initial_cache(memory, memory_mask, states)

    def step(self, y, cache):
        """One step on the embedded token `y (B, e)`: `(output (B, d), alignments (B, S),
        features, cache)`; the features are the output, as in `decode`."""
        return self._step.step(y, cache)


class PostAttention:
    """`decoder="luong"`: a decoder RNN runs over the whole target, then a
    `SequenceAttention` over the memory and `tanh(W [h_t; context_t])` (a bias-free Dense
    named `attention_layer`): parallel over time in training. Takes content attention only."""

    @staticmethod
    def check_options(options):
        if options["mechanism"] != "content":
            raise ValueError(
                "decoder='luong' attends in parallel after the decoder RNN, so it takes "
                "mechanism='content' only; use decoder='bahdanau' for a stateful mechanism. "
                f"Received: attention['mechanism']={options['mechanism']!r}"
            )

    def __init__(self, rnn, units, options, defaults, attention_layer_size, dtype, copy=False):
        self.decoder_rnn = _utils.make_rnn(
            rnn, units, "decoder", dtype, return_sequences=True, return_state=True
        )
        attention_kwargs = {"units": options["units"]} if options["units"] else {}
        self.cross_attention = SequenceAttention(
            score=options["score"],
            normalizer=options["normalizer"],
            dtype=dtype,
            name="cross_attention",
            **attention_kwargs,
        )
        self.attention_layer = keras.layers.Dense(
            attention_layer_size or units,
            activation="tanh",
            use_bias=False,
            dtype=dtype,
            name="attention_layer",
        )
        self.layers = {
            "decoder_rnn": self.decoder_rnn,
            "cross_attention": self.cross_attention,
            "attention_layer": self.attention_layer,
        }

    def decode(self, y, target_mask, memory, memory_mask, states, training):
        """`(outputs (B, T, d), alignments (B, T, S), features)` of the whole target; the
        features of the generation probability are `[h_t; context_t]`."""
        hidden, *_ = self.decoder_rnn(y, mask=target_mask, initial_state=states, training=training)
        context, alignments = self.cross_attention(
            [hidden, memory],
            mask=[target_mask, memory_mask],
            return_attention_scores=True,
            training=training,
        )
        features = ops.concatenate([hidden, context], axis=-1)
        return self.attention_layer(features), alignments, features

    # the entries of the cache that no step changes: the memory's attention cache, its mask
    fixed_entries = ("attention", "memory_mask")

    def initial_cache(self, memory, memory_mask, states):
        return {
            "cell_state": states,
            "attention": self.cross_attention.init_cache(memory),
            "memory_mask": memory_mask,
        }

    def step(self, y, cache):
        """One step on the embedded token `y (B, e)`: `(output (B, d), alignments (B, S),
        features, cache)`; the features are `[h_t; context_t]`, as in `decode`."""
        hidden, states = _ops.cell_step(self.decoder_rnn.cell, y, cache["cell_state"])
        context, alignments, _ = self.cross_attention(
            ops.expand_dims(hidden, 1),
            mask=[None, cache["memory_mask"]],
            cache=cache["attention"],
            return_attention_scores=True,
        )
        context, alignments = ops.squeeze(context, 1), ops.squeeze(alignments, 1)
        features = ops.concatenate([hidden, context], axis=-1)
        return self.attention_layer(features), alignments, features, {**cache, "cell_state": states}


KINDS = {"bahdanau": InputFeeding, "luong": PostAttention}
