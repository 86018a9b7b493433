"""A small Tacotron-like decoder: tokens in, continuous frames and a stop token out.

The data are synthetic "speech": each token id has its own frame vector and
duration (1 to 3 frames), so an utterance's frames are its tokens' vectors
repeated by their durations, with a little noise. The model is Tacotron 2's
shape at toy size:

- encoder: `Embedding(mask_zero) -> Bidirectional(LSTM)`, the memory;
- decoder: a prenet (two ReLU `Dense`) on the previous frame, an
  `AttentionDecoder` with `LocationSensitiveAttention` and
  `output_attention="both"` (the cell output and the context together);
- heads: a frame projection and a stop-token logit, both from that output.

Training is teacher-forced (the previous true frame goes in); inference is
`keras_attn_rnn.frame_decoding.decode_frames`, which feeds each predicted
frame back until the stop token fires.

Run: `python examples/tacotron_like.py` (any Keras backend).
"""

import argparse

import keras
import numpy as np

from keras_attn_rnn import AttentionDecoder, mechanisms
from keras_attn_rnn.frame_decoding import decode_frames

VOCAB, FRAME = 12, 4  # token ids 1..11 (0 pads); frame size


def make_data(count, seed=0, max_tokens=6):
    """`(tokens (N, S), frames (N, T, FRAME), stop (N, T), frame_mask (N, T))`, 0-padded."""
    rng = np.random.default_rng(seed)
    vectors = np.random.default_rng(123).uniform(-1, 1, (VOCAB, FRAME)).astype("float32")
    durations = 1 + np.arange(VOCAB) % 3
    utterances = []
    for _ in range(count):
        ids = rng.integers(1, VOCAB, rng.integers(2, max_tokens + 1))
        frames = np.concatenate([np.repeat(vectors[i][None], durations[i], 0) for i in ids])
        utterances.append((ids, frames + rng.normal(0, 0.02, frames.shape)))
    source_len = max(len(ids) for ids, _ in utterances)
    target_len = max(len(frames) for _, frames in utterances)
    tokens = np.zeros((count, source_len), "int32")
    frames = np.zeros((count, target_len, FRAME), "float32")
    stop = np.zeros((count, target_len), "float32")
    frame_mask = np.zeros((count, target_len), "float32")
    for n, (ids, utterance) in enumerate(utterances):
        tokens[n, : len(ids)] = ids
        frames[n, : len(utterance)] = utterance
        stop[n, len(utterance) - 1] = 1.0
        frame_mask[n, : len(utterance)] = 1.0
    return tokens, frames, stop, frame_mask


def build(units=32):
    """The training model (teacher forcing) and the layers inference reuses."""
    tokens = keras.Input((None,), dtype="int32", name="tokens")
    previous = keras.Input((None, FRAME), name="previous_frames")
    embedded = keras.layers.Embedding(VOCAB, 16, mask_zero=True)(tokens)
    memory = keras.layers.Bidirectional(keras.layers.LSTM(units // 2, return_sequences=True))(
        embedded
    )
    prenet = [
        keras.layers.Dense(units, activation="relu", name="prenet_1"),
        keras.layers.Dense(units // 2, activation="relu", name="prenet_2"),
    ]
    decoder = AttentionDecoder(
        keras.layers.LSTMCell(units),
        attention=mechanisms.LocationSensitiveAttention(units // 2, filters=4, kernel_size=7),
        output_attention="both",
        name="decoder",
    )
    frame_layer = keras.layers.Dense(FRAME, name="frame")
    stop_layer = keras.layers.Dense(1, name="stop")
    x = previous
    for layer in prenet:
        x = layer(x)
    outputs = decoder([x, memory])  # the memory's mask comes from the embedding
    model = keras.Model(
        [tokens, previous],
        {"frames": frame_layer(outputs), "stop": stop_layer(outputs)},
    )
    encoder = keras.Model(tokens, memory)
    return model, encoder, prenet, decoder, frame_layer, stop_layer


def teacher_forced(frames):
    """The previous frames: a zero go frame, then the targets shifted right."""
    return np.concatenate([np.zeros_like(frames[:, :1]), frames[:, :-1]], axis=1)


def main(epochs=30, count=256, seed=0):
    keras.utils.set_random_seed(seed)
    tokens, frames, stop, frame_mask = make_data(count, seed)
    model, encoder, prenet, decoder, frame_layer, stop_layer = build()
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss={"frames": "mse", "stop": keras.losses.BinaryCrossentropy(from_logits=True)},
    )
    history = model.fit(
        [tokens, teacher_forced(frames)],
        {"frames": frames, "stop": stop[..., None]},
        sample_weight={"frames": frame_mask, "stop": frame_mask},
        batch_size=32,
        epochs=epochs,
        verbose=0,
    )
    test_tokens, test_frames, _, test_mask = make_data(4, seed + 1)
    source_mask = test_tokens != 0
    result = decode_frames(
        decoder,
        encoder(test_tokens),
        memory_mask=source_mask,
        prenet=prenet,
        frame_layer=frame_layer,
        stop_layer=stop_layer,
        max_steps=test_frames.shape[1] + 6,
    )
    true_lengths = test_mask.sum(1).astype("int32")
    steps = min(result.frames.shape[1], test_frames.shape[1])
    mask = test_mask[:, :steps, None] * (np.arange(steps) < result.lengths[:, None])[..., None]
    error = ((result.frames[:, :steps] - test_frames[:, :steps]) ** 2 * mask).sum() / (
        mask.sum() * FRAME
    )
    print(f"loss: {history.history['loss'][0]:.3f} -> {history.history['loss'][-1]:.3f}")
    print(f"stop after {result.lengths.tolist()} frames; true lengths {true_lengths.tolist()}")
    print(f"free-running frame MSE over the true frames: {error:.4f}")
    return history.history["loss"], result, true_lengths, float(error)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    main(epochs=parser.parse_args().epochs)
