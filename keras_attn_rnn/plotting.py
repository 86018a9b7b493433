"""Attention heatmaps. matplotlib is imported only when a plot is made."""

from pathlib import Path

import numpy as np

# A single row longer than this is drawn in lines (`plot_attention`, `attention_image`).
WRAP = 32
# Cells of a wrapped row are 3:1, wide enough for a short word; tokens are written in them
# while a line has at most this many.
LINE_CELL_ASPECT, LINE_TEXT_MAX = 3, 16


def plot_attention(weights, source_tokens, target_tokens, title=None, ax=None, wrap=WRAP):
    """Plot attention weights as a heatmap with token labels.

    Args:
        weights: array-like `(T, S)`: row t is the attention of target step
            t over the source positions (a `(S,)` vector is one row).
        source_tokens: `S` labels for the columns (the attended keys).
        target_tokens: `T` labels for the rows (the queries).
        title: optional figure title.
        ax: optional matplotlib Axes to draw into.
        wrap: a single row (one query, as a classifier's pooling) over more
            than `wrap` positions is drawn as text: the positions in lines,
            each cell coloured by its weight with its token written in it,
            the lines' first positions on the left (a long text stays
            readable, not a strip). `None`: always one row.

    Returns:
        The matplotlib `Figure`. Works with the non-interactive Agg backend;
            close it with `matplotlib.pyplot.close(fig)` when done.

    Examples:
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
    if wrap is not None and rows == 1 and cols > wrap:
        return _plot_lines(weights[0], source_tokens, target_tokens, title, ax)
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


def _plot_lines(row, source_tokens, target_tokens, title, ax):
    """`plot_attention` of one row over many positions, wrapped into lines (see `_lines`)."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    grid = _lines(row)
    lines, width = grid.shape
    if ax is None:
        fig = Figure(figsize=(min(16.0, 2.0 + 0.9 * width), min(16.0, 1.6 + 0.3 * lines)))
        ax = fig.add_subplot(1, 1, 1)
    else:
        fig = ax.figure
    top = max(1e-6, float(row.max()))
    cmap = colormaps["viridis"].with_extremes(bad="white")  # the last line's empty cells
    image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0.0, vmax=top, aspect="auto")
    if width <= LINE_TEXT_MAX:
        for i, token in enumerate(source_tokens):
            line, column = divmod(i, width)
            dark = row[i] < 0.6 * top  # viridis is dark below ~0.6 of its range
            text = _fit(_show(token), 9)
            ax.text(
                column,
                line,
                text,
                ha="center",
                va="center",
                fontsize=7,
                color="white" if dark else "black",
            )
    ax.set_xticks([])
    ax.set_yticks(range(lines), labels=[str(line * width) for line in range(lines)])
    ax.set_ylabel("position")
    query = f"; the attention of {_show(target_tokens[0])}" if target_tokens else ""
    ax.set_xlabel(f"{width} positions a line{query}")
    if title:
        ax.set_title(title)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    return fig


def _line_shape(count):
    """`(lines, width)` of `count` positions in lines of 3:1 cells: about square."""
    width = max(1, int(np.ceil(np.sqrt(count / LINE_CELL_ASPECT))))
    return -(-count // width), width


def _lines(row):
    """`(S,)` weights as a `(lines, width)` grid (`_line_shape`), NaN after the last."""
    lines, width = _line_shape(len(row))
    grid = np.full(lines * width, np.nan, dtype="float32")
    grid[: len(row)] = row
    return grid.reshape(lines, width)


def _fit(text, longest):
    return text if len(text) <= longest else text[: longest - 1] + "…"


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
    wrap=WRAP,
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
        wrap: a single row over more than `wrap` positions is drawn in lines
            of cells three times as wide as high, each token written in its
            cell, the image about square (MLflow's UI shows a 256-pixel
            thumbnail: a strip would be a line of pixels); `None`: one row.

    Returns:
        image: uint8 `(T * cell, S * cell, 3)` without labels; with labels, the
            grid sits at the bottom right of a white margin holding them.

    Examples:
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
    top = float(weights.max()) if vmax is None else float(vmax)
    scaled = weights / max(1e-6, top)
    rgb = colormaps[colormap](np.clip(scaled, 0.0, 1.0), bytes=True)[..., :3]
    rows, cols = weights.shape
    if wrap is not None and rows == 1 and cols > wrap:
        return _image_lines(rgb[0], cell, max_side, source_tokens, target_tokens)
    cell = max(1, min(cell, max_side // max(weights.shape)))
    grid = np.repeat(np.repeat(rgb, cell, axis=0), cell, axis=1)
    if source_tokens is None and target_tokens is None:
        return grid
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


def _image_lines(rgb, cell, max_side, source_tokens, target_tokens):
    """`attention_image` of one row's colours `(S, 3)`, wrapped into lines (see `_lines`): each
    token written in its cell, the lines' first positions on the left, the query above."""
    from PIL import Image, ImageDraw

    size, tokens = 11, [_show(str(t)) for t in source_tokens or []]
    lines, width = _line_shape(len(rgb))
    cell = max(1, min(cell, max_side // (LINE_CELL_ASPECT * width), max_side // lines))
    wide, font = LINE_CELL_ASPECT * cell, _label_font(size)
    left = int(font.getlength(str((lines - 1) * width))) + 6
    above = size + 6 if target_tokens else 0
    canvas = Image.new("RGB", (left + width * wide, above + lines * cell), "white")
    draw = ImageDraw.Draw(canvas)
    for line in range(lines):
        label, y = str(line * width), above + line * cell + (cell - size) // 2
        draw.text((left - 3 - font.getlength(label), y), label, fill="black", font=font)
    for i, colour in enumerate(rgb):
        line, column = divmod(i, width)
        x, y = left + column * wide, above + line * cell
        draw.rectangle([x, y, x + wide - 1, y + cell - 1], fill=tuple(int(c) for c in colour))
        if i < len(tokens) and cell >= size + 2 and width <= LINE_TEXT_MAX:
            text = tokens[i]
            while len(text) > 1 and font.getlength(text) > wide - 4:
                text = text[:-2] + "…"
            dark = 0.299 * colour[0] + 0.587 * colour[1] + 0.114 * colour[2] < 128
            ink = "white" if dark else "black"
            draw.text((x + 2, y + (cell - size) // 2), text, fill=ink, font=font)
    if target_tokens:
        draw.text((left, 3), _show(str(target_tokens[0])), fill="black", font=font)
    return np.asarray(canvas)


def _label_font(size):
    """DejaVu Sans, matplotlib's own font (`plot_attention` writes its labels in it): it has the
    glyphs `_show` writes for whitespace (␣ ∅), which Pillow's default font (Aileron) lacks."""
    import matplotlib
    from PIL import ImageFont

    return ImageFont.truetype(
        str(Path(matplotlib.get_data_path()) / "fonts/ttf/DejaVuSans.ttf"), size
    )
