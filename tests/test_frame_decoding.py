"""`decode_frames`: free-running decoding of continuous frames is the decoder's own full call
fed with the frames it predicted, and each sequence stops at its first stop frame."""

import keras
import numpy as np
import pytest
from helpers import to_numpy

from keras_attn_rnn import AttentionDecoder, mechanisms
from keras_attn_rnn.frame_decoding import decode_frames

pytestmark = pytest.mark.layers

FRAME = 3


def _parts():
    keras.utils.set_random_seed(2)
    decoder = AttentionDecoder(
        keras.layers.LSTMCell(8),
        attention=mechanisms.LocationSensitiveAttention(6, filters=2, kernel_size=3),
        output_attention="both",
    )
    memory = np.random.default_rng(0).standard_normal((2, 5, 4)).astype("float32")
    memory_mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], bool)
    decoder([np.zeros((2, 1, 4), "float32"), memory])
    prenet = [keras.layers.Dense(6, activation="relu"), keras.layers.Dense(4, activation="relu")]
    frame_layer = keras.layers.Dense(FRAME)
    return decoder, memory, memory_mask, prenet, frame_layer


class _Schedule:
    """A stop layer that fires for row b at its `at[b]`-th call (1-based), else stays off."""

    def __init__(self, at):
        self.at, self.calls = at, 0

    def __call__(self, output):
        self.calls += 1
        fire = np.array([[30.0 if self.calls == a else -30.0] for a in self.at], "float32")
        return keras.ops.convert_to_tensor(fire) + 0.0 * output[:, :1]


def test_free_running_equals_the_full_call_fed_its_own_frames():
    decoder, memory, memory_mask, prenet, frame_layer = _parts()
    steps = 6
    result = decode_frames(
        decoder,
        memory,
        prenet=prenet,
        frame_layer=frame_layer,
        stop_layer=_Schedule([0, 0]),  # never stops
        max_steps=steps,
        memory_mask=memory_mask,
    )
    assert result.frames.shape == (2, steps, FRAME)
    assert result.lengths.tolist() == [steps, steps]
    previous = np.concatenate([np.zeros((2, 1, FRAME), "float32"), result.frames[:, :-1]], 1)
    x = previous
    for layer in prenet:
        x = layer(x)
    outputs, alignments = decoder(
        [x, memory], mask=[None, memory_mask], return_attention_scores=True
    )
    np.testing.assert_allclose(result.frames, to_numpy(frame_layer(outputs)), atol=1e-5)
    np.testing.assert_allclose(result.alignments, to_numpy(alignments), atol=1e-5)
    assert np.all(result.alignments[1, :, 3:] == 0.0)  # padded memory never attended


def test_each_sequence_stops_at_its_first_stop_frame_and_the_loop_ends_with_the_last():
    decoder, memory, memory_mask, prenet, frame_layer = _parts()
    stop_layer = _Schedule([2, 4])
    result = decode_frames(
        decoder,
        memory,
        prenet=prenet,
        frame_layer=frame_layer,
        stop_layer=stop_layer,
        max_steps=10,
        memory_mask=memory_mask,
        go_frame=np.full((FRAME,), -1.0, "float32"),
    )
    assert stop_layer.calls == 4  # no step after every sequence stopped
    assert result.lengths.tolist() == [2, 4]
    assert result.frames.shape == (2, 4, FRAME)
    assert np.all(result.frames[0, 2:] == 0.0) and np.all(result.frames[1] != 0.0)
    assert np.all(result.alignments[0, 2:] == 0.0)
    np.testing.assert_allclose(result.alignments[1].sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(result.stop_probabilities[0], [0.0, 1.0, 0.0, 0.0], atol=1e-6)


def test_decode_frames_refuses_bad_arguments_before_decoding():
    decoder, memory, _, prenet, frame_layer = _parts()
    good = dict(prenet=prenet, frame_layer=frame_layer, stop_layer=keras.layers.Dense(1))
    cases = [
        (dict(max_steps=0), "max_steps must be an integer >= 1"),
        (dict(max_steps=3, stop_threshold=1.0), r"stop_threshold must be a float in \(0, 1\)"),
        (dict(max_steps=3, go_frame=np.zeros((3, FRAME))), r"go_frame must have shape"),
        (dict(max_steps=3, prenet=[]), "prenet must be a layer or callable"),
    ]
    for overrides, message in cases:
        with pytest.raises(ValueError, match=message):
            decode_frames(decoder, memory, **{**good, **overrides})
    with pytest.raises(ValueError, match="decoder must be a keras_attn_rnn.AttentionDecoder"):
        decode_frames(keras.layers.LSTMCell(4), memory, max_steps=2, **good)
    with pytest.raises(ValueError, match="go_frame is needed"):
        decode_frames(
            decoder,
            memory,
            max_steps=2,
            prenet=prenet,
            frame_layer=lambda o: o[:, :FRAME],
            stop_layer=keras.layers.Dense(1),
        )
