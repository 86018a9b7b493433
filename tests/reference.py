"""NumPy references of the score functions and masked softmax, read from a layer's weights."""

import numpy as np
from helpers import to_numpy

from keras_attn_rnn import scores


def weights_of(score_layer):
    return {w.path.split("/")[-1]: to_numpy(w).astype("float64") for w in score_layer.weights}


def score(score_layer, query, keys):
    """`(B, Tq, d_q) x (B, Tv, d_k) -> (B, Tq, Tv)` in float64."""
    name = scores.name_of(score_layer)
    w = weights_of(score_layer)
    q = np.asarray(query, "float64")
    k = np.asarray(keys, "float64")
    if name == "dot":
        return q @ np.swapaxes(k, -1, -2)
    if name == "scaled_dot":
        return w.get("scale", 1.0) * (q @ np.swapaxes(k, -1, -2)) / np.sqrt(q.shape[-1])
    if name == "general":
        return w.get("scale", 1.0) * (q @ np.swapaxes(k @ w["kernel"], -1, -2))
    if name == "tanh_dot":
        return q @ np.swapaxes(np.tanh(k @ w["kernel"] + w["bias"]), -1, -2)
    if name == "additive":
        v = w["v"]
        bias = 0.0
        if "g" in w:
            v = w["g"] * v / np.linalg.norm(v)
            bias = w["b"]
        hidden = (q @ w["query_kernel"])[:, :, None, :] + (k @ w["key_kernel"])[:, None, :, :]
        return np.tanh(hidden + bias) @ v
    raise AssertionError(name)


def masked_softmax(s, mask=None):
    s = np.asarray(s, "float64")
    mask = np.ones(s.shape, bool) if mask is None else np.broadcast_to(mask, s.shape)
    s = np.where(mask, s, -np.inf)
    top = np.max(np.where(mask, s, -1e300), axis=-1, keepdims=True)
    e = np.where(mask, np.exp(s - top), 0.0)
    total = e.sum(-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def causal(tq, tv):
    return np.arange(tq)[:, None] >= np.arange(tv)[None, :]


def window(tq, tv, w):
    return np.abs(np.arange(tq)[:, None] - np.arange(tv)[None, :]) <= w
