import copy

import keras
from keras import ops, tree

from keras_attn_rnn import _keras_compat, masking, scores
from keras_attn_rnn.layers import _common, _decoder_cells


@keras.saving.register_keras_serializable(package="keras_attn_rnn")
class AttentionDecoder(keras.layers.Layer):
    """An RNN cell with attention over a memory: the successor of
    `tfa.seq2seq.AttentionWrapper` + `keras.layers.RNN`.

    Each step, exactly as TensorFlow Addons' `AttentionWrapper`:
    `cell_input = concat(x_t, attention_{t-1})` (with `input_feeding`),
    `cell_output, state = cell(cell_input, state)`,
    `a_t = masked_softmax(score(cell_output, memory))`,
    `context_t = a_t . memory`,
    `attention_t = attention_layer(concat(cell_output, context_t))` (a
    bias-free `Dense` named `attention_layer`, only with
    `attention_layer_size`; otherwise `attention_t = context_t`); the step
    output is `attention_t`, or `cell_output` with `output_attention=False`.
    The first `attention_{t-1}` is zeros. tfa's `BahdanauAttention(units,
    normalize)` is `score=scores.Additive(units, normalize)` and its
    `LuongAttention(scale)` is `score=scores.General(use_scale)`.

    The memory's key projection is computed once per sequence. For a plain
    `LSTMCell` or `GRUCell` without dropout the `x_t` half of the cell's input
    matmul is applied to all steps at once before the loop; every other cell
    is called as is. The loop is Keras's backend loop (the one
    `keras.layers.RNN` uses): it compiles with `jit_compile=True`.

    Args:
        cell: a Keras RNN cell (`LSTMCell`, `GRUCell`, `SimpleRNNCell`,
            `StackedRNNCells`, a list of cells, or any layer with `call`,
            `state_size` and optionally `output_size`).
        score: a score name (`"dot"`, `"scaled_dot"`, `"general"`,
            `"additive"`, `"tanh_dot"`) or a `scores.Score` instance (an
            unbuilt one is copied under the name `score`).
        units: hidden size of `score="additive"` (tfa's `num_units`;
            default: the memory size). Other scores take no `units`.
        attention_layer_size: size of the attention layer; `None` uses the
            context as the attention.
        output_attention: output the attention (True) or the cell output.
        input_feeding: feed the previous attention into the cell's input.
        return_sequences: return every step's output, or only the last.
        return_state: also return the final cell state and attention.
        normalizer: `"softmax"` or a function `(scores, axis) -> weights`.

    Call arguments:
        inputs: `[inputs (B, T, d_in), memory (B, S, d_m)]`.
        mask: `[inputs_mask (B, T), memory_mask (B, S)]`, booleans; Keras
            masks from an encoder flow in.
        initial_state: the cell's initial state (e.g. an encoder's `[h, c]`),
            shaped as the cell's `state_size`; zeros by default.
        training: whether the cell's dropout is active.
        return_attention_scores: also return the alignment history.

    Returns:
        `outputs` `(B, T, d_out)` (or `(B, d_out)` without
        `return_sequences`); with `return_state`, then the final cell state
        tensors (flattened) and the final attention `(B, d_att)`; with
        `return_attention_scores`, last, the float32 alignments `(B, T, S)`.
        `d_att` is `attention_layer_size` or `d_m`; `d_out` is `d_att` or the
        cell's output size.

    Masking: padded memory positions get weight exactly 0 at every step (a
    row with no valid position gets a zero context). At masked input steps
    the state (cell state and attention) is carried over unchanged, as in
    `keras.layers.RNN`, and the outputs and alignments are zero; the last
    output is the one of the last unmasked step. The output mask is the
    inputs mask.

    Step API (generation, beam search): after the layer is built,
    `state = decoder.get_initial_state(memory, memory_mask=None,
    cell_state=None)` returns a dict of tensors: `"cell_state"` (a list
    shaped as the cell's state), `"attention"` `(B, d_att)`, `"keys"` (the
    score's prepared keys), `"memory"` and `"memory_mask"` (`(B, S)` bool).
    `output, state, alignments = decoder.step(x_t, state)` takes
    `x_t (B, d_in)` and returns `(B, d_out)`, the next state (same
    structure) and float32 `(B, S)`. Every entry has the batch first, so the
    state can be tiled (`ops.repeat`), gathered, and carried through
    `ops.while_loop`. `step()` run `T` times gives the full call's results.

    Example:

    >>> decoder = AttentionDecoder(keras.layers.LSTMCell(8), attention_layer_size=8)
    >>> x, memory = keras.random.normal((2, 5, 4)), keras.random.normal((2, 7, 6))
    >>> outputs, alignments = decoder([x, memory], return_attention_scores=True)
    >>> outputs.shape, alignments.shape
    ((2, 5, 8), (2, 5, 7))

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
        **kwargs,
    ):
        if isinstance(cell, dict):  # from_config; Keras's from_config may mutate the dict
            cell = keras.saving.deserialize_keras_object(copy.deepcopy(cell))
        if isinstance(cell, (list, tuple)):
            cell = keras.layers.StackedRNNCells(cell)
        if not (callable(getattr(cell, "call", None)) and hasattr(cell, "state_size")):
            raise ValueError(
                "cell must be a Keras RNN cell with `call` and `state_size` "
                f"(e.g. keras.layers.LSTMCell). Received: cell={cell!r}"
            )
        _common.check_positive_int("units", units)
        _common.check_positive_int("attention_layer_size", attention_layer_size)
        scores.check_units(score, units, "cell output size")
        self.normalizer_fn = masking.get_normalizer(normalizer)
        super().__init__(**kwargs)
        self.cell = cell
        self.score = scores.serialize(score)  # config form; the layer is score_layer
        self.units = units
        self.attention_layer_size = attention_layer_size
        self.output_attention = output_attention
        self.input_feeding = input_feeding
        self.return_sequences = return_sequences
        self.return_state = return_state
        self.normalizer = normalizer
        self.score_layer = scores.get(score, units=units, dtype=self.dtype_policy, name="score")
        if not self.score_layer.built and self.score_layer.name != "score":
            # an unbuilt instance is a template: its weights are named after their role
            config = {**self.score_layer.get_config(), "name": "score", "dtype": self.dtype_policy}
            self.score_layer = type(self.score_layer).from_config(config)
        self.attention_layer = None
        if attention_layer_size is not None:
            self.attention_layer = keras.layers.Dense(
                attention_layer_size,
                use_bias=False,
                dtype=self.dtype_policy,
                name="attention_layer",
            )
        self.supports_masking = True

    # ------------------------------------------------------------------ build

    @staticmethod
    def _split(inputs):
        if (
            not isinstance(inputs, (list, tuple))
            or _common.is_shape(inputs)
            or len(inputs) != 2
            or inputs[1] is None
        ):
            raise ValueError(
                "AttentionDecoder expects inputs=[inputs, memory]; the memory is "
                f"missing. Received: inputs={_common.describe(inputs)}"
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
        _common.check_rank("inputs", inputs_shape, 3)
        _common.check_rank("memory", memory_shape, 3)
        self._check_batch(inputs_shape, memory_shape)
        self.input_dim = inputs_shape[-1]
        self.memory_dim = memory_shape[-1]
        self.attention_size = self.attention_layer_size or self.memory_dim
        cell_input_dim = self.input_dim + (self.attention_size if self.input_feeding else 0)
        if not self.cell.built:
            self.cell.build((None, cell_input_dim))
        output_size = getattr(self.cell, "output_size", None)
        self.cell_output_size = output_size or tree.flatten(self.cell.state_size)[0]
        self.score_layer.build_for((None, 1, self.cell_output_size), tuple(memory_shape))
        if self.attention_layer is not None:
            self.attention_layer.build((None, self.cell_output_size + self.memory_dim))
        self.fast_path = _decoder_cells.fast_path_kind(self.cell)

    # --------------------------------------------------------------- the step

    def _cell_maths(self):
        """The cell's step maths (`fast_path` may be set to None to call the cell itself)."""
        return _decoder_cells.cell_maths(
            self.cell, self.fast_path, self.input_dim, self.input_feeding
        )

    def _step(self, maths, x, cell_state, attention, keys, memory, key_mask, weights, training):
        cell_output, cell_state = maths.step(x, cell_state, attention, weights, training)
        context, alignments = _common.attend(
            self.score_layer,
            ops.expand_dims(cell_output, 1),
            keys,
            memory,
            mask=key_mask,
            normalizer=self.normalizer_fn,
        )
        context = ops.squeeze(context, 1)
        if self.attention_layer is not None:
            attention = self.attention_layer(ops.concatenate([cell_output, context], axis=-1))
        else:
            attention = context
        output = attention if self.output_attention else cell_output
        return output, ops.squeeze(alignments, 1), cell_state, attention

    # -------------------------------------------------------------- the state

    def _zero_cell_state(self, batch_size):
        get_initial_state = getattr(self.cell, "get_initial_state", None)
        if get_initial_state is not None:
            state = get_initial_state(batch_size=batch_size)
        else:
            state = [
                ops.zeros((batch_size, d), dtype=self.cell.compute_dtype)
                for d in tree.flatten(self.cell.state_size)
            ]
        return list(state) if tree.is_nested(state) else [state]

    def _cell_initial_state(self, batch_size, cell_state):
        default = self._zero_cell_state(batch_size)
        if cell_state is None:
            return default
        flat = tree.flatten(cell_state)
        sizes = tree.flatten(self.cell.state_size)
        shapes = [tuple(s.shape) for s in flat]
        if len(flat) != len(sizes) or any(len(s) != 2 or s[-1] != d for s, d in zip(shapes, sizes)):
            raise ValueError(
                f"initial_state must match the cell's state_size {list(sizes)}: "
                f"{len(sizes)} tensor(s) of shape (batch, size). "
                f"Received: initial_state with shapes {shapes}"
            )
        flat = [ops.cast(s, self.cell.compute_dtype) for s in flat]
        return tree.pack_sequence_as(default, flat)

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
        _common.check_rank("memory", memory.shape, 3)
        batch_size = ops.shape(memory)[0]
        if memory_mask is None:
            memory_mask = ops.ones(ops.shape(memory)[:2], dtype="bool")
        _common.check_mask("memory_mask", memory_mask, tuple(memory.shape[:2]))
        return {
            "cell_state": self._cell_initial_state(batch_size, cell_state),
            "attention": ops.zeros((batch_size, self.attention_size), dtype=self.compute_dtype),
            "keys": self.score_layer.prepare_keys(memory),
            "memory": memory,
            "memory_mask": ops.cast(memory_mask, "bool"),
        }

    def step(self, inputs, state, training=False):
        """One decoder step: `(x_t, state) -> (output, state, alignments)`."""
        self._check_built("step")
        maths = self._cell_maths()
        x = maths.project_inputs(ops.cast(inputs, self.compute_dtype))
        output, alignments, cell_state, attention = self._step(
            maths,
            x,
            state["cell_state"],
            state["attention"],
            state["keys"],
            state["memory"],
            ops.expand_dims(state["memory_mask"], 1),
            maths.weights(),
            training,
        )
        return output, {**state, "cell_state": cell_state, "attention": attention}, alignments

    # ------------------------------------------------------------------- call

    def call(
        self,
        inputs,
        mask=None,
        initial_state=None,
        training=None,
        return_attention_scores=False,
    ):
        sequence, memory = self._split(inputs)
        _common.check_rank("inputs", sequence.shape, 3)
        _common.check_rank("memory", memory.shape, 3)
        self._check_batch(sequence.shape, memory.shape)
        inputs_mask, memory_mask = _common.split_masks(mask, 2)
        _common.check_mask("inputs_mask", inputs_mask, tuple(sequence.shape[:2]))
        _common.check_mask("memory_mask", memory_mask, tuple(memory.shape[:2]))

        batch_size = ops.shape(memory)[0]
        cell_state = self._cell_initial_state(batch_size, initial_state)
        attention = ops.zeros((batch_size, self.attention_size), dtype=self.compute_dtype)
        keys = self.score_layer.prepare_keys(memory)
        key_mask = (
            None if memory_mask is None else ops.expand_dims(ops.cast(memory_mask, "bool"), 1)
        )
        maths = self._cell_maths()
        weights = maths.weights()
        projected = maths.project_inputs(sequence)
        if _common.has_dropout(self.cell):
            _common.prime_dropout_masks(
                self.cell,
                ops.concatenate([sequence[:, 0], attention], -1)
                if self.input_feeding
                else sequence[:, 0],
                cell_state,
            )

        masked = inputs_mask is not None
        if masked:
            # the mask travels as a last channel: TF's loop wants one input tensor here
            step_mask = ops.cast(ops.expand_dims(inputs_mask, -1), projected.dtype)
            step_inputs = ops.concatenate([projected, step_mask], axis=-1)
            last_output = ops.zeros(
                (
                    batch_size,
                    self.attention_size if self.output_attention else self.cell_output_size,
                ),
                dtype=self.compute_dtype,
            )
            carry = [cell_state, attention, last_output]
        else:
            step_inputs = projected
            carry = [cell_state, attention]

        def step_fn(step_input, states):
            x = step_input[:, :-1] if masked else step_input
            old_state, old_attention = states[0], states[1]
            output, alignments, new_state, new_attention = self._step(
                maths, x, old_state, old_attention, keys, memory, key_mask, weights, training
            )
            if not masked:
                return (output, alignments), [new_state, new_attention]
            keep = step_input[:, -1:] > 0
            new_state = tree.map_structure(
                lambda new, old: ops.where(keep, new, old), new_state, old_state
            )
            new_attention = ops.where(keep, new_attention, old_attention)
            last = ops.where(keep, output, states[2])
            output = ops.where(keep, output, ops.zeros_like(output))
            alignments = ops.where(keep, alignments, ops.zeros_like(alignments))
            return (output, alignments), [new_state, new_attention, last]

        _, (outputs, alignments), final = _keras_compat.rnn(
            step_fn,
            step_inputs,
            carry,
            input_length=sequence.shape[1],
        )
        if _common.has_dropout(self.cell):
            _common.reset_dropout_masks(self.cell)
        final_state, final_attention = final[0], final[1]

        if self.return_sequences:
            result = [outputs]
        else:
            result = [final[2] if masked else outputs[:, -1]]
        if self.return_state:
            result += tree.flatten(final_state) + [final_attention]
        if return_attention_scores:
            result.append(alignments)
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
            "normalizer": masking.serialize_normalizer(self.normalizer),
        }
