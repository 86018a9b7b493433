"""Attention heatmaps. matplotlib is imported only when a plot is made."""

from pathlib import Path

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


def attention_image(
    weights,
    cell=24,
    colormap="viridis",
    max_side=1024,
    vmax=1.0,
    source_tokens=None,
    target_tokens=None,
):
    """Attention weights as an RGB image, cheaply: a colormap lookup and nearest-neighbour
    upscaling, with the tokens drawn by Pillow, no figure (for images logged every epoch;
    `plot_attention` draws a full figure).

    Args:
        weights: array-like `(T, S)` (or `(S,)`): row t is the attention of
            step t over the positions.
        cell: pixels per weight along each axis (reduced to fit `max_side`).
        colormap: a matplotlib colormap name.
        max_side: the longest side of the grid in pixels, at most.
        vmax: the weight drawn brightest (0 is darkest). The default 1.0 is
            one scale for every image, so the steps of a stepped image
            compare like with like (uniform attention is dark, a sharp one
            bright); `None` scales by the weights' own maximum, as
            `plot_attention` does.
        source_tokens: optional labels of the columns (the attended
            positions), written above the grid; as in `plot_attention`,
            labels past the last column are left out.
        target_tokens: optional labels of the rows, written left of the grid.
            Where a cell is smaller than the text, every k-th label is drawn.

    Returns:
        uint8 `(T * cell, S * cell, 3)` without labels; with labels, the grid
        sits at the bottom right of a white margin holding them.

    Example:

    >>> from keras_attn_rnn.plotting import attention_image
    >>> attention_image([[0.9, 0.1], [0.2, 0.8]], cell=4).shape
    (8, 8, 3)
    >>> labelled = attention_image([[0.9, 0.1]], source_tokens=["a", "b"], target_tokens=["B"])
    >>> labelled.shape[0] > 24 and labelled.shape[1] > 48
    True
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
    grid = np.repeat(np.repeat(rgb, cell, axis=0), cell, axis=1)
    if source_tokens is None and target_tokens is None:
        return grid
    rows, cols = weights.shape
    return _with_labels(
        grid, cell, list(source_tokens or [])[:cols], list(target_tokens or [])[:rows]
    )


def _with_labels(grid, cell, source_tokens, target_tokens, longest=12):
    """`grid` on a white canvas with column labels above (rotated) and row labels left."""
    from PIL import Image, ImageDraw

    size = 11
    font = _label_font(size)

    def text_of(token):
        text = _show(str(token))
        return text if len(text) <= longest else text[: longest - 1] + "…"

    def width_of(texts):
        return max((int(font.getlength(t)) for t in texts), default=0)

    columns, rows = [text_of(t) for t in source_tokens], [text_of(t) for t in target_tokens]
    every = max(1, -(-(size + 2) // cell))  # labels at least a line apart
    left, above = (width_of(texts) + 6 if texts else 0 for texts in (rows, columns))
    height, width = grid.shape[:2]
    canvas = Image.new("RGB", (left + width, above + height), "white")
    canvas.paste(Image.fromarray(grid), (left, above))
    draw = ImageDraw.Draw(canvas)
    for i in range(0, len(rows), every):
        y = above + i * cell + (cell - size) // 2
        draw.text((left - 3 - font.getlength(rows[i]), y), rows[i], fill="black", font=font)
    if columns:
        strip = Image.new("RGB", (above, width), "white")  # drawn lying down, then turned
        lying = ImageDraw.Draw(strip)
        for j in range(0, len(columns), every):
            y = width - (j * cell + (cell + size) // 2)
            lying.text((3, y), columns[j], fill="black", font=font)
        canvas.paste(strip.transpose(Image.Transpose.ROTATE_270), (left, 0))
    return np.asarray(canvas)


def _label_font(size):
    """DejaVu Sans, matplotlib's own font (`plot_attention` writes its labels in it): it has the
    glyphs `_show` writes for whitespace (␣ ∅), which Pillow's default font (Aileron) lacks."""
    import matplotlib
    from PIL import ImageFont

    return ImageFont.truetype(
        str(Path(matplotlib.get_data_path()) / "fonts/ttf/DejaVuSans.ttf"), size
    )
