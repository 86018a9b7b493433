"""Attention heatmaps. matplotlib is imported only when a plot is made."""

import numpy as np


def plot_attention(weights, source_tokens, target_tokens, title=None, ax=None):
    """Plot attention weights as a heatmap with token labels.

    Args:
        weights: array-like `(T, S)`: row t is the attention of target step
            t over the source positions (a `(S,)` vector is one row).
        source_tokens: `S` labels for the columns (the attended keys).
        target_tokens: `T` labels for the rows (the queries).
        title: optional figure title.
        ax: optional matplotlib Axes to draw into.

    Returns:
        The matplotlib `Figure`. Works with the non-interactive Agg backend;
        close it with `matplotlib.pyplot.close(fig)` when done.

    Example:

    >>> from keras_attn_rnn.plotting import plot_attention
    >>> fig = plot_attention([[0.9, 0.1], [0.2, 0.8]], ["a", "b"], ["B", "A"])
    >>> len(fig.axes[0].images)  # the heatmap
    1
    """
    from matplotlib.figure import Figure

    weights = np.asarray(weights, dtype="float32")
    if weights.ndim == 1:
        weights = weights[None, :]
    if weights.ndim != 2:
        raise ValueError(
            f"weights must have shape (T, S) or (S,). Received: weights.shape={weights.shape}"
        )
    rows, cols = weights.shape
    source_tokens = [str(t) for t in source_tokens][:cols]
    target_tokens = [str(t) for t in target_tokens][:rows]
    if ax is None:
        width = min(16.0, 1.5 + 0.35 * cols)
        height = min(16.0, 1.2 + 0.35 * rows)
        fig = Figure(figsize=(width, height))
        ax = fig.add_subplot(1, 1, 1)
    else:
        fig = ax.figure
    image = ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=max(1e-6, float(weights.max())))
    ax.set_xticks(range(len(source_tokens)), labels=[_show(t) for t in source_tokens])
    ax.set_yticks(range(len(target_tokens)), labels=[_show(t) for t in target_tokens])
    ax.tick_params(axis="x", labelrotation=90)
    ax.set_xlabel("attended position")
    if title:
        ax.set_title(title)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    return fig


def _show(token):
    """Make whitespace tokens visible as tick labels."""
    return {" ": "␣", "\n": "\\n", "\t": "\\t", "": "∅"}.get(token, token)


def attention_image(weights, cell=24, colormap="viridis", max_side=1024, vmax=1.0):
    """Attention weights as an RGB image, cheaply: a colormap lookup and nearest-neighbour
    upscaling, no figure (for images logged every epoch; `plot_attention` draws labels).

    Args:
        weights: array-like `(T, S)` (or `(S,)`): row t is the attention of
            step t over the positions.
        cell: pixels per weight along each axis (reduced to fit `max_side`).
        colormap: a matplotlib colormap name.
        max_side: the longest side in pixels, at most.
        vmax: the weight drawn brightest (0 is darkest). The default 1.0 is
            one scale for every image, so the steps of a stepped image
            compare like with like (uniform attention is dark, a sharp one
            bright); `None` scales by the weights' own maximum, as
            `plot_attention` does.

    Returns:
        uint8 `(T * cell, S * cell, 3)`.
    """
    from matplotlib import colormaps

    weights = np.asarray(weights, dtype="float32")
    if weights.ndim == 1:
        weights = weights[None, :]
    if weights.ndim != 2 or weights.size == 0:
        raise ValueError(
            f"weights must have shape (T, S) or (S,), non-empty. Received: weights.shape="
            f"{weights.shape}"
        )
    cell = max(1, min(cell, max_side // max(weights.shape)))
    top = float(weights.max()) if vmax is None else float(vmax)
    scaled = weights / max(1e-6, top)
    rgb = colormaps[colormap](np.clip(scaled, 0.0, 1.0), bytes=True)[..., :3]
    return np.repeat(np.repeat(rgb, cell, axis=0), cell, axis=1)
