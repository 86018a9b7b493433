"""Free-running decoding of continuous frames with a stop token (Tacotron-style decoders).

`decode_frames(decoder, memory, prenet=..., frame_layer=..., stop_layer=...,
max_steps=...)` feeds each predicted frame back through the prenet into an
`AttentionDecoder` until every sequence's stop probability passes a
threshold: the loop Tacotron 2 runs at inference, one `decoder.step` per
frame (the memory's keys are prepared once).
"""

import dataclasses

import numpy as np
from keras import ops

from keras_attn_rnn.layers import AttentionDecoder
from keras_attn_rnn.samplers.sampler import check_int
from keras_attn_rnn.stepping import AttentionDecoderStep


@dataclasses.dataclass
class FrameDecodingResult:
    """What `decode_frames` returns (NumPy arrays).

    Attributes:
        frames: float32 `(B, T, n)`: the predicted frames, zero after each
            sequence's stop frame (`T` is the longest sequence, at most
            `max_steps`).
        stop_probabilities: float32 `(B, T)`, zero after the stop frame.
        alignments: float32 `(B, T, S)` (the first mechanism's), zero after
            the stop frame.
        lengths: int32 `(B,)`: frames up to and including the first whose
            stop probability is above the threshold (`max_steps` if none).
    """

    frames: np.ndarray
    stop_probabilities: np.ndarray
    alignments: np.ndarray
    lengths: np.ndarray


def decode_frames(
    decoder,
    memory,
    *,
    prenet,
    frame_layer,
    stop_layer,
    max_steps,
    memory_mask=None,
    initial_state=None,
    go_frame=None,
    stop_threshold=0.5,
):
    """Decodes frames until each sequence stops or `max_steps` is reached.

    Each step: `x = prenet(previous_frame)`, `output, state, alignments =
    decoder.step(x, state)`, `frame = frame_layer(output)`, `stop =
    sigmoid(stop_layer(output))`; the first previous frame is `go_frame`.
    Give the decoder `output_attention="both"` to predict from the cell
    output and the context together, as Tacotron 2 does.

    Args:
        decoder: a built `AttentionDecoder`.
        memory: `(B, S, d_m)` encoder outputs.
        prenet: a layer (or callable, or list of them applied in order)
            from a frame `(B, n)` to the decoder input `(B, d_in)`. It is
            called as is: a Tacotron 2 prenet, whose dropout stays on at
            inference, calls its `Dropout` with `training=True` itself.
        frame_layer: from the decoder output to a frame `(B, n)`.
        stop_layer: from the decoder output to a stop logit `(B, 1)`.
        max_steps: the most frames per sequence.
        memory_mask: `(B, S)` booleans, True at real positions.
        initial_state: the decoder cell's initial state (zeros by default).
        go_frame: the first previous frame, `(n,)` or `(B, n)`; zeros of
            `frame_layer.units` by default.
        stop_threshold: a sequence stops at the first frame whose stop
            probability is above this, in `(0, 1)`.

    Returns:
        A `FrameDecodingResult`.

    Examples:
        >>> from keras_attn_rnn import AttentionDecoder
        >>> from keras_attn_rnn.frame_decoding import decode_frames
        >>> decoder = AttentionDecoder(keras.layers.LSTMCell(8), output_attention="both")
        >>> memory = keras.random.normal((2, 5, 6))
        >>> _ = decoder([keras.ops.zeros((2, 1, 4)), memory])
        >>> result = decode_frames(
        ...     decoder, memory, prenet=keras.layers.Dense(4, activation="relu"),
        ...     frame_layer=keras.layers.Dense(3), stop_layer=keras.layers.Dense(1),
        ...     max_steps=7)
        >>> result.frames.shape[0], result.frames.shape[2], result.alignments.shape[2]
        (2, 3, 5)
    """
    if not isinstance(decoder, AttentionDecoder):
        raise ValueError(
            f"decoder must be a keras_attn_rnn.AttentionDecoder. Received: decoder={decoder!r}"
        )
    check_int("max_steps", max_steps, 1)
    if isinstance(stop_threshold, bool) or not (
        isinstance(stop_threshold, (int, float)) and 0 < stop_threshold < 1
    ):
        raise ValueError(
            f"stop_threshold must be a float in (0, 1). Received: stop_threshold={stop_threshold!r}"
        )
    prenet, frame_layer, stop_layer = (
        _callables(name, value)
        for name, value in (
            ("prenet", prenet),
            ("frame_layer", frame_layer),
            ("stop_layer", stop_layer),
        )
    )
    decoder_step = AttentionDecoderStep(decoder)
    state = decoder_step.initial_cache(memory, memory_mask, initial_state)
    batch = int(ops.shape(state["memory"])[0])
    previous = _go_frame(go_frame, frame_layer, batch)

    frames, stops, alignments = [], [], []
    done = np.zeros(batch, bool)
    lengths = np.full(batch, max_steps, "int32")
    for step in range(max_steps):
        output, weights, _, state = decoder_step.step(_apply(prenet, previous), state)
        frame = _apply(frame_layer, output)
        stop = ops.sigmoid(ops.cast(ops.reshape(_apply(stop_layer, output), (batch,)), "float32"))
        live = ~done  # sequences that had not stopped before this step
        frames.append(np.where(live[:, None], ops.convert_to_numpy(frame), 0.0))
        stops.append(np.where(live, ops.convert_to_numpy(stop), 0.0))
        alignments.append(np.where(live[:, None], ops.convert_to_numpy(weights), 0.0))
        stopping = live & (stops[-1] > stop_threshold)
        lengths[stopping] = step + 1
        done |= stopping
        if done.all():
            break
        previous = frame
    return FrameDecodingResult(
        frames=np.stack(frames, 1).astype("float32"),
        stop_probabilities=np.stack(stops, 1).astype("float32"),
        alignments=np.stack(alignments, 1).astype("float32"),
        lengths=lengths,
    )


def _callables(name, value):
    parts = list(value) if isinstance(value, (list, tuple)) else [value]
    if not parts or not all(callable(part) for part in parts):
        raise ValueError(
            f"{name} must be a layer or callable, or a non-empty list of them. "
            f"Received: {name}={value!r}"
        )
    return parts


def _apply(parts, x):
    for part in parts:
        x = part(x)
    return x


def _go_frame(go_frame, frame_layer, batch):
    if go_frame is None:
        units = getattr(frame_layer[-1], "units", None)
        if units is None:
            raise ValueError(
                "go_frame is needed when the frame layer has no `units` (a Dense's frame "
                "size). Received: go_frame=None"
            )
        return ops.zeros((batch, units))
    go_frame = ops.convert_to_tensor(go_frame, "float32")
    if len(go_frame.shape) == 1:
        go_frame = ops.repeat(ops.expand_dims(go_frame, 0), batch, axis=0)
    if len(go_frame.shape) != 2 or go_frame.shape[0] != batch:
        raise ValueError(
            f"go_frame must have shape (n,) or ({batch}, n). "
            f"Received: go_frame with shape {tuple(go_frame.shape)}"
        )
    return go_frame
