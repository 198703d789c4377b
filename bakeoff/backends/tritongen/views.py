"""Where a value lives in memory: a strided view of a buffer (element units), and the layout ops on views.

Layout ops (reshape, transpose, broadcast) become views when they can, so kernels read through strides
instead of a copy. `None` from `reshape_view` means the reshape needs a copy kernel.
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class View:
    """`shape` and `strides` in elements over buffer `buffer`, starting `offset` elements in."""

    buffer: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def is_contiguous(self) -> bool:
        return all(s == c for s, c, d in zip(self.strides, contiguous_strides(self.shape), self.shape) if d != 1)


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides (elements) of `shape`."""
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= max(d, 1)
    return tuple(reversed(out))


def contiguous(buffer: str, shape: tuple[int, ...]) -> View:
    return View(buffer, tuple(shape), contiguous_strides(tuple(shape)))


def permute_view(v: View, perm: tuple[int, ...]) -> View:
    return View(v.buffer, tuple(v.shape[p] for p in perm), tuple(v.strides[p] for p in perm), v.offset)


def broadcast_view(v: View, shape: tuple[int, ...]) -> View:
    """`v` expanded to `shape` (NumPy rules): new leading dims and size-1 dims get stride 0."""
    pad = len(shape) - len(v.shape)
    src_shape = (1,) * pad + v.shape
    src_strides = (0,) * pad + v.strides
    strides = tuple(0 if (s == 1 and d != 1) else st for s, st, d in zip(src_shape, src_strides, shape))
    return View(v.buffer, tuple(shape), strides, v.offset)


def reshape_view(v: View, shape: tuple[int, ...]) -> View | None:
    """`v` reshaped without a copy, or None when its strides do not allow it (then: materialize)."""
    shape = tuple(shape)
    if v.is_contiguous():
        return View(v.buffer, shape, contiguous_strides(shape), v.offset)
    # Split/merge dims only inside runs of v's dims that are contiguous among themselves (torch's rule).
    old = [(d, s) for d, s in zip(v.shape, v.strides) if d != 1]
    new_strides: list[int] = []
    i, j = 0, 0
    new = list(shape)
    while j < len(new):
        if new[j] == 1:
            new_strides.append(0)
            j += 1
            continue
        if i >= len(old):
            return None
        # a chunk of old dims [i, k) whose product equals a chunk of new dims [j, l)
        k, l, po, pn = i + 1, j + 1, old[i][0], new[j]
        while po != pn:
            if po < pn:
                if k >= len(old) or old[k - 1][1] != old[k][1] * old[k][0]:
                    return None
                po *= old[k][0]
                k += 1
            else:
                if l >= len(new):
                    return None
                pn *= new[l]
                l += 1
        for a in range(i, k - 1):
            if old[a][1] != old[a + 1][1] * old[a + 1][0]:
                return None
        stride = old[k - 1][1]
        for m in range(l - 1, j - 1, -1):
            new_strides.append(stride)
            stride *= new[m]
        new_strides[len(new_strides) - (l - j):] = reversed(new_strides[len(new_strides) - (l - j):])
        i, j = k, l
    return View(v.buffer, shape, tuple(new_strides), v.offset)
