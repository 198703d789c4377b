"""Element offsets of strided views as Triton expressions, with adjacent dims merged where strides allow."""
from __future__ import annotations


def merge_dims(shape: tuple[int, ...], strides: tuple[int, ...]) -> list[tuple[int, int]]:
    """(size, stride) runs: size-1 dims dropped, neighbours merged when row-major contiguous (or both stride 0)."""
    dims = [(d, s) for d, s in zip(shape, strides) if d != 1]
    out: list[tuple[int, int]] = []
    for d, s in dims:
        if out and (out[-1][1] == s * d or (out[-1][1] == 0 and s == 0)):
            out[-1] = (out[-1][0] * d, s)
        else:
            out.append((d, s))
    return out


def linear_offset(index: str, shape: tuple[int, ...], strides: tuple[int, ...]) -> str:
    """Offset expression of the element whose row-major index over `shape` is `index`; '0' if none."""
    runs = merge_dims(shape, strides)
    terms = []
    inner = 1
    for pos in range(len(runs) - 1, -1, -1):
        size, stride = runs[pos]
        if stride != 0:
            coord = index if inner == 1 else f"({index} // {inner})"
            if pos > 0:
                coord = f"({coord} % {size})"
            terms.append(coord if stride == 1 else f"{coord} * {stride}")
        inner *= size
    return " + ".join(reversed(terms)) or "0"


def row_col_offset(row: str, col: str | None, shape: tuple[int, ...], strides: tuple[int, ...],
                   offset: int = 0) -> str:
    """Offset of element (row, col) where `row` is a row-major index over shape[:-1] and `col` the last dim.

    col None: the view's last dim is read at index 0 (a per-row value).
    """
    parts = [linear_offset(row, shape[:-1], strides[:-1])]
    if col is not None and shape and shape[-1] != 1 and strides[-1] != 0:
        parts.append(col if strides[-1] == 1 else f"{col} * {strides[-1]}")
    if offset:
        parts.append(str(offset))
    parts = [p for p in parts if p != "0"]
    return "(" + " + ".join(parts) + ")" if parts else "0"
