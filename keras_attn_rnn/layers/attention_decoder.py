import copy

import keras
from keras import ops, tree

from keras_attn_rnn import (
    _keras_compat,
    checks,
    masking,
    mechanisms,
    normalizers,
    scores,
    serializable,
)
from keras_attn_rnn.layers import _common, _decoder_cells, _decoder_state, _decoder_step


@serializable.register
class AttentionDecoder(keras.layers.Layer):
    """An RNN cell with attention over a memory: the successor of
    `tfa.seq2seq.AttentionWrapper` + `keras.layers.RNN`.

    Each step, exactly as TensorFlow Addons' `AttentionWrapper`:
    `cell_input = concat(x_t, attention_{t-1})` (with `input_feeding`),
    `cell_output, state = cell(cell_input, state)`; then for each attention
    mechanism `m`: `a_t = m(cell_output, memory, m_state)` (content attention:
    `normalizer(score(cell_output, memory))`), `context_t = a_t . memory`,
    `attention_m = attention_layer_m(concat(cell_output, context_t))` (a
    bias-free `Dense`, only with an `attention_layer_size`; otherwise
    `attention_m = context_t`); `attention_t` is the concatenation over the
    mechanisms. The step output is `attention_t`, or `cell_output` with
    `output_attention=False`, or both, `concat(cell_output, attention_t)`,
    with `output_attention="both"` (Tacotron 2's decoder output, which its
    frame and stop projections read). The first `attention_{t-1}` is zeros. tfa's
    `BahdanauAttention(units, normalize)` is `score=scores.Additive(units,
    normalize)`, its `LuongAttention(scale)` is
    `score=scores.General(use_scale)`, and its monotonic mechanisms are
    `attention=mechanisms.MonotonicAttention(...)`.

    The memory's key projections (with the additive score's bias) are
    computed once per sequence. For a plain `LSTMCell` or `GRUCell` without
    dropout the `x_t` half of the cell's input matmul (and its bias) is
    applied to all steps at once before the loop, and its gradient is one
    matmul after it. With an LSTM, under a fusing compiler (JAX, XLA) the
    fed-back attention and the recurrent state go through one matmul per step
    (`concat(attention_{t-1}, h_{t-1})` against the stacked kernel); op by op
    (TensorFlow's graph mode and eager, PyTorch eager) through two, so that
    `h_{t-1}`'s runs beside the attention of the step before. Every other
    cell is called as is. With an
    inputs mask only the state is selected per step; the outputs and
    alignments of padded steps are zeroed once, after the loop. The additive
    score's gradient recomputes its `tanh` instead of keeping a `(B, S, U)`
    tensor per step (`scores.step_energy`). The loop is
    Keras's backend loop (the one `keras.layers.RNN` uses): it compiles with
    `jit_compile=True`.

    Args:
        cell: a Keras RNN cell (`LSTMCell`, `GRUCell`, `SimpleRNNCell`,
            `StackedRNNCells`, a list of cells, or any layer with `call`,
            `state_size` and optionally `output_size`).
        score: shorthand for `attention=ContentAttention(score, units,
            normalizer)`: a score name (`"dot"`, `"scaled_dot"`, `"general"`,
            `"additive"`, `"tanh_dot"`) or a `scores.Score` instance (an
            unbuilt one is copied under the name `score`).
        units: hidden size of `score="additive"` (tfa's `num_units`;
            default: the memory size). Other scores take no `units`.
        attention_layer_size: size of the attention layer; `None` uses the
            context as the attention. With several mechanisms, a list with
            one size (or None) per mechanism.
        output_attention: output the attention (True), the cell output
            (False) or both concatenated, cell output first (`"both"`).
        input_feeding: feed the previous attention into the cell's input.
        return_sequences: return every step's output, or only the last.
        return_state: also return the final cell state and attention.
        normalizer: the content attention's normalizer: `"softmax"`,
            `"hardmax"`, `"sparsemax"`, `"entmax15"` or a function
            `(scores, axis) -> weights`.
        attention: a `keras_attn_rnn.mechanisms.Mechanism`, a mechanism name,
            a dict of a mechanism's options with its name under `"mechanism"`
            (`Seq2Seq`'s form; content attention without one), or a list of
            them (instead of `score`, `units` and `normalizer`).

    Call arguments:
        - inputs: `[inputs (B, T, d_in), memory (B, S, d_m)]`.
        - mask: `[inputs_mask (B, T), memory_mask (B, S)]`, booleans; Keras
              masks (`Embedding(mask_zero=True)`, `Masking`, an encoder's
              output) flow in, with or without an `initial_state`.
        - initial_state: the cell's initial state (e.g. an encoder's `[h, c]`),
              shaped as the cell's `state_size`; zeros by default.
        - training: whether the cell's dropout (and monotonic noise) is active.
        - return_attention_scores: also return the alignment history.
        - inputs_mask: the same as `mask`; Keras fills it from the inputs'
              masks when the call has several tensor arguments (`mask` wins).

    Returns:
        outputs: `(B, T, d_out)` (or `(B, d_out)` without `return_sequences`);
            `d_out` is `d_att`, the cell's output size, or their sum with
            `output_attention="both"`.
        states: the final cell state tensors (flattened), only with
            `return_state`.
        attention: the final attention `(B, d_att)`, only with `return_state`;
            `d_att` is the sum over the mechanisms of the attention layer size
            or `d_m`.
        alignments: float32 `(B, T, S)`, last, only with
            `return_attention_scores` (a list of them, one per mechanism, when
            there are several).

    Masking: padded memory positions get weight exactly 0 at every step (a
    row with no valid position gets a zero context). At masked input steps
    the state (cell state, attention, mechanism states) is carried over
    unchanged, as in `keras.layers.RNN`, and the outputs and alignments are
    zero; the last output is the one of the last unmasked step. The output
    mask is the inputs mask.

    Step API (generation, beam search): after the layer is built,
    `state = decoder.get_initial_state(memory, memory_mask=None,
    cell_state=None)` returns a dict of tensors: `"cell_state"` (a list
    shaped as the cell's state), `"attention"` `(B, d_att)`,
    `"attention_state"` (one dict per mechanism), `"keys"` (each
    mechanism's prepared keys), `"memory"` and `"memory_mask"` (`(B, S)`
    bool). `output, state, alignments = decoder.step(x_t, state)` takes
    `x_t (B, d_in)` and returns `(B, d_out)`, the next state (same
    structure) and float32 `(B, S)` (a list with several mechanisms). Every
    entry has the batch first, so the state can be tiled (`ops.repeat`),
    gathered, and carried through `ops.while_loop`. `step()` run `T` times
    gives the full call's results.

    Examples:
        >>> from keras_attn_rnn import AttentionDecoder, mechanisms, scores
        >>> decoder = AttentionDecoder(keras.layers.LSTMCell(8), attention_layer_size=8)
        >>> x, memory = keras.random.normal((2, 5, 4)), keras.random.normal((2, 7, 6))
        >>> outputs, alignments = decoder([x, memory], return_attention_scores=True)
        >>> keras.ops.shape(outputs), keras.ops.shape(alignments)
        ((2, 5, 8), (2, 5, 7))
        >>> two = AttentionDecoder(
        ...     keras.layers.LSTMCell(8),
        ...     attention=[mechanisms.ContentAttention("general"),
        ...                mechanisms.MonotonicAttention(scores.Additive(8))],
        ...     attention_layer_size=[8, 4])
        >>> keras.ops.shape(two([x, memory]))  # the attentions of both, 8 + 4
        (2, 5, 12)

    Reference:
        Bahdanau et al., 2015, "Neural Machine Translation by Jointly Learning
        to Align and Translate"; Luong et al., 2015, "Effective Approaches to
        Attention-based Neural Machine Translation".
    """

    def __init__(
        self,
        cell,
        score="additive",
        units=None,
        attention_layer_size=None,
        output_attention=True,
        input_feeding=True,
        return_sequences=True,
        return_state=False,
        normalizer="softmax",
        attention=None,
        **kwargs,
    ):
        if isinstance(cell, dict):  # from_config; Keras's from_config may mutate the dict
            cell = keras.saving.deserialize_keras_object(copy.deepcopy(cell))
        if isinstance(cell, (list, tuple)):
            cell = keras.layers.StackedRNNCells(cell)
        if isinstance(cell, keras.layers.RNN):
            raise ValueError(
                "cell must be an RNN cell such as keras.layers.LSTMCell(units), not a whole RNN "
                "layer: AttentionDecoder runs the loop over time itself (tfa's "
                f"AttentionWrapper took a cell too). Received: cell={type(cell).__name__} layer "
                f"{cell.name!r}; pass its cell type instead, e.g. keras.layers.LSTMCell"
            )
        if not (callable(getattr(cell, "call", None)) and hasattr(cell, "state_size")):
            raise ValueError(
                "cell must be a Keras RNN cell with `call` and `state_size` "
                f"(e.g. keras.layers.LSTMCell). Received: cell={cell!r}"
            )
        if not (isinstance(output_attention, bool) or output_attention == "both"):
            raise ValueError(
                'output_attention must be True, False or "both". '
                f"Received: output_attention={output_attention!r}"
            )
        checks.check_positive_int("units", units)
        if attention is None:
            scores.check_units(score, units, "cell output size")
            normalizers.get(normalizer)
        elif score != "additive" or units is not None or normalizer != "softmax":
            raise ValueError(
                "score, units and normalizer are the shorthand for "
                "attention=ContentAttention(score, units, normalizer); pass either them or "
                f"attention. Received: score={score!r}, units={units!r}, "
                f"normalizer={normalizer!r}, attention={attention!r}"
            )
        mechanism_list = _as_list(attention)
        sizes = _layer_sizes(attention_layer_size, len(mechanism_list) if attention else 1)
        super().__init__(**kwargs)
        self.cell = cell
        self.score = scores.serialize(score)  # config form of the shorthand
        self.units = units
        self.attention_layer_size = attention_layer_size
        self.output_attention = output_attention
        self.input_feeding = input_feeding
        self.return_sequences = return_sequences
        self.return_state = return_state
        self.normalizer = normalizer
        if attention is None:
            self.attention = None
            self.mechanisms = [
                mechanisms.ContentAttention(
                    score, units, normalizer, dtype=self.dtype_policy, name="content_attention"
                )
            ]
        else:
            self.mechanisms = [_mechanism(m) for m in mechanism_list]
            self.attention = [mechanisms.serialize(m) for m in self.mechanisms]
        single = len(sizes) == 1
        self.attention_layers = [
            None
            if size is None
            else keras.layers.Dense(
                size,
                use_bias=False,
                dtype=self.dtype_policy,
                name="attention_layer" if single else f"attention_layer_{i}",
            )
            for i, size in enumerate(sizes)
        ]
        self.supports_masking = True

    @property
    def score_layer(self):
        """The score layer of the (first) mechanism."""
        return self.mechanisms[0].score_layer

    @property
    def attention_layer(self):
        """The attention layer of a one-mechanism decoder (None without one)."""
        if len(self.attention_layers) != 1:
            raise AttributeError(
                "a decoder with several mechanisms has one layer per mechanism: "
                "use attention_layers"
            )
        return self.attention_layers[0]

    # ------------------------------------------------------------------ build

    @staticmethod
    def _split(inputs):
        if (
            not isinstance(inputs, (list, tuple))
            or checks.is_shape(inputs)
            or len(inputs) < 2
            or inputs[1] is None
        ):
            raise ValueError(
                "AttentionDecoder expects inputs=[inputs, memory]; the memory is "
                f"missing. Received: inputs={checks.describe(inputs)}"
            )
        if len(inputs) != 2:
            raise ValueError(
                "AttentionDecoder expects inputs=[inputs, memory], two tensors (the memory is "
                "both keys and values; a mechanism projects its own keys). "
                f"Received: inputs={checks.describe(inputs)}"
            )
        return inputs[0], inputs[1]

    @staticmethod
    def _check_batch(inputs_shape, memory_shape):
        a, b = inputs_shape[0], memory_shape[0]
        if a is not None and b is not None and a != b:
            raise ValueError(
                "inputs and memory must have the same batch size. "
                f"Received: inputs.shape={tuple(inputs_shape)}, "
                f"memory.shape={tuple(memory_shape)}"
            )

    def build(self, input_shape):
        inputs_shape, memory_shape = self._split(input_shape)
        checks.check_rank("inputs", inputs_shape, 3)
        checks.check_rank("memory", memory_shape, 3)
        self._check_batch(inputs_shape, memory_shape)
        self.input_dim = inputs_shape[-1]
        self.memory_dim = memory_shape[-1]
        self.attention_sizes = [
            self.memory_dim if layer is None else layer.units for layer in self.attention_layers
        ]
        self.attention_size = sum(self.attention_sizes)
        cell_input_dim = self.input_dim + (self.attention_size if self.input_feeding else 0)
        if not self.cell.built:
            self.cell.build((None, cell_input_dim))
        output_size = getattr(self.cell, "output_size", None)
        self.cell_output_size = output_size or tree.flatten(self.cell.state_size)[0]
        for mechanism in self.mechanisms:
            if not mechanism.built:
                mechanism.build((None, self.cell_output_size), tuple(memory_shape))
        for layer in self.attention_layers:
            if layer is not None:
                layer.build((None, self.cell_output_size + self.memory_dim))
        self.fast_path = _decoder_cells.fast_path_kind(self.cell)

    # --------------------------------------------------------------- the step

    def _decoder_step(self):
        """The step maths (set `fast_path` to None to have the cell called as is)."""
        cell_maths = _decoder_cells.cell_maths(
            self.cell, self.fast_path, self.input_dim, self.input_feeding
        )
        return _decoder_step.DecoderStep(
            cell_maths, self.mechanisms, self.attention_layers, self.output_attention
        )

    @property
    def output_size(self):
        """`d_out`, the size of each step's output (once built)."""
        if self.output_attention == "both":
            return self.cell_output_size + self.attention_size
        return self.attention_size if self.output_attention else self.cell_output_size

    # -------------------------------------------------------------- the state

    def _initial_state(self, memory, memory_mask, cell_state):
        """The loop state before the first step, and the keys every step reads."""
        return _decoder_state.initial_state(
            self.cell,
            self.mechanisms,
            self.attention_size,
            self.compute_dtype,
            memory,
            memory_mask,
            cell_state,
        )

    def _check_built(self, method):
        if not self.built:
            raise ValueError(
                f"{method}() needs a built AttentionDecoder: call it once on "
                "[inputs, memory] or call build([inputs_shape, memory_shape]) first. "
                f"Received: a decoder with built={self.built}"
            )

    def get_initial_state(self, memory, memory_mask=None, cell_state=None):
        """The step API's initial state: see the class docstring."""
        self._check_built("get_initial_state")
        memory = ops.cast(memory, self.compute_dtype)
        checks.check_rank("memory", memory.shape, 3)
        if memory_mask is None:
            memory_mask = ops.ones(ops.shape(memory)[:2], dtype="bool")
        checks.check_mask("memory_mask", memory_mask, tuple(memory.shape[:2]))
        memory_mask = ops.cast(memory_mask, "bool")
        memory = masking.zero_masked(memory, memory_mask)
        state, keys = self._initial_state(memory, memory_mask, cell_state)
        return {**state, "keys": keys, "memory": memory, "memory_mask": memory_mask}

    def step(self, inputs, state, training=False):
        """One decoder step: `(x_t, state) -> (output, state, alignments)`."""
        self._check_built("step")
        decoder_step = self._decoder_step()
        x = decoder_step.project_inputs(ops.cast(inputs, self.compute_dtype))
        output, alignments, new_state = decoder_step(
            x,
            state,
            state["keys"],
            state["memory"],
            state["memory_mask"],
            decoder_step.weights(),
            training,
        )
        return output, {**state, **new_state}, _item_or_list(alignments)

    # ------------------------------------------------------------------- call

    def call(
        self,
        inputs,
        mask=None,
        initial_state=None,
        training=None,
        return_attention_scores=False,
        inputs_mask=None,
    ):
        # Keras fills `mask` when `inputs` is the only tensor argument, and `inputs_mask`
        # when there are several (an `initial_state` given): the same masks either way.
        if mask is None:
            mask = inputs_mask
        sequence, memory = self._split(inputs)
        checks.check_rank("inputs", sequence.shape, 3)
        checks.check_rank("memory", memory.shape, 3)
        self._check_batch(sequence.shape, memory.shape)
        inputs_mask, memory_mask = _common.split_call_masks(mask, ("inputs_mask", "memory_mask"))
        checks.check_mask("inputs_mask", inputs_mask, tuple(sequence.shape[:2]))
        checks.check_mask("memory_mask", memory_mask, tuple(memory.shape[:2]))
        if memory_mask is not None:
            memory_mask = ops.cast(memory_mask, "bool")
            memory = masking.zero_masked(memory, memory_mask)

        state, keys = self._initial_state(memory, memory_mask, initial_state)
        decoder_step = self._decoder_step()
        weights = decoder_step.weights()
        projected = decoder_step.project_inputs(sequence)
        if _common.has_dropout(self.cell):
            first = sequence[:, 0]
            _common.prime_dropout_masks(
                self.cell,
                ops.concatenate([first, state["attention"]], -1) if self.input_feeding else first,
                state["cell_state"],
            )

        masked = inputs_mask is not None
        carry_last = masked and not self.return_sequences
        carry = [state]
        if masked:
            # the mask travels as a last channel: TF's loop wants one input tensor here
            step_mask = ops.cast(ops.expand_dims(inputs_mask, -1), projected.dtype)
            step_inputs = ops.concatenate([projected, step_mask], axis=-1)
            if carry_last:
                batch_size = ops.shape(memory)[0]
                carry.append(ops.zeros((batch_size, self.output_size), self.compute_dtype))
        else:
            step_inputs = projected

        def step_fn(step_input, states):
            if masked:  # a split, whose gradient is one concat, not a strided slice's
                x, step_mask = ops.split(step_input, [step_input.shape[-1] - 1], axis=-1)
            else:
                x = step_input
            output, alignments, new_state = decoder_step(
                x, states[0], keys, memory, memory_mask, weights, training
            )
            if not masked:
                return (output, *alignments), [new_state]
            # a padded row keeps its state; its output and alignments are zeroed after the loop
            real = step_mask > 0  # (B, 1): this step is not padding
            new_state = _decoder_state.keep_padded_rows(real, new_state, states[0])
            if not carry_last:
                return (output, *alignments), [new_state]
            last = ops.where(real, output, states[1])
            return (output, *alignments), [new_state, last]

        _, (outputs, *alignments), final = _keras_compat.rnn(
            step_fn, step_inputs, carry, input_length=sequence.shape[1]
        )
        if masked:  # zero outputs and alignments at padded steps, once for all steps
            real = ops.expand_dims(ops.cast(inputs_mask, "bool"), -1)
            outputs = ops.where(real, outputs, ops.zeros_like(outputs))
            alignments = [ops.where(real, a, ops.zeros_like(a)) for a in alignments]
        if _common.has_dropout(self.cell):
            _common.reset_dropout_masks(self.cell)
        final_state = final[0]

        if self.return_sequences:
            result = [outputs]
        else:
            result = [final[1] if carry_last else outputs[:, -1]]
        if self.return_state:
            result += tree.flatten(final_state["cell_state"]) + [final_state["attention"]]
        if return_attention_scores:
            result.append(_item_or_list(alignments))
        return result[0] if len(result) == 1 else tuple(result)

    def compute_mask(self, inputs, mask=None):
        if not self.return_sequences:
            return None
        return _common.split_masks(mask, 2)[0]

    def get_config(self):
        return {
            **super().get_config(),
            "cell": keras.saving.serialize_keras_object(self.cell),
            "score": self.score,
            "units": self.units,
            "attention_layer_size": self.attention_layer_size,
            "output_attention": self.output_attention,
            "input_feeding": self.input_feeding,
            "return_sequences": self.return_sequences,
            "return_state": self.return_state,
            "normalizer": normalizers.serialize(self.normalizer),
            "attention": self.attention,
        }


def _mechanism(identifier):
    """A mechanism from a name, an instance, a Keras config, or a dict of options with
    its name under `"mechanism"` (content attention without one): `Seq2Seq`'s form."""
    if isinstance(identifier, dict) and "class_name" not in identifier:
        options = dict(identifier)
        return mechanisms.get(options.pop("mechanism", "content"), **options)
    return mechanisms.get(identifier)


def _as_list(attention):
    if attention is None:
        return []
    items = list(attention) if isinstance(attention, (list, tuple)) else [attention]
    if not items:
        raise ValueError(
            "attention must be a mechanism or a non-empty list of them. Received: attention=[]"
        )
    return items


def _layer_sizes(attention_layer_size, count):
    """One attention-layer size (or None) per mechanism, checked."""
    if isinstance(attention_layer_size, (list, tuple)):
        sizes = list(attention_layer_size)
        if len(sizes) != count:
            raise ValueError(
                f"attention_layer_size must have one entry per mechanism ({count}). "
                f"Received: attention_layer_size={attention_layer_size!r}"
            )
    elif attention_layer_size is not None and count > 1:
        raise ValueError(
            f"attention_layer_size must be a list of {count} sizes (or None) for {count} "
            f"mechanisms, as in tfa. Received: attention_layer_size={attention_layer_size!r}"
        )
    else:
        sizes = [attention_layer_size] * count
    for size in sizes:
        checks.check_positive_int("attention_layer_size", size)
    return sizes


def _item_or_list(values):
    return values[0] if len(values) == 1 else list(values)
