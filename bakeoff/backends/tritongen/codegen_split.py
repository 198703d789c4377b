"""Operand planes for 3xTF32 on the tensor cores: one pointwise launch splits a float32 operand into TF32 parts.

`x = hi + lo`, each rounded to nearest TF32 (`_tf32` in the module header), written row-major with the
reduction dim contiguous (rows padded to 16 bytes): the K-major layout TF32 wgmma wants for either operand, read
by the consuming kernel through TMA descriptors. A kernel that uses planes runs its split launches first
(`KernelSource.split`, `configs.launches`).
"""
from __future__ import annotations

from dataclasses import dataclass

BLOCK = 64  # the split launches' square tile (BLOCK_R = BLOCK_C)


def padded(n) -> int:
    """`n` float32 elements rounded up to 16 bytes: TMA wants 16-byte-aligned row strides."""
    return -(-int(n) // 4) * 4


@dataclass(frozen=True)
class Planes:
    """One operand's split: `src` (buffer) read at `at` (an expression of the head `h`, row `r` and column `c`),
    into `<name>hi` / `<name>lo`, each `heads` x `rows` x padded(`cols`) float32."""

    name: str
    src: str
    at: str
    heads: int
    rows: object
    cols: object
    what: str

    @property
    def names(self) -> tuple[str, str]:
        return f"{self.name}hi", f"{self.name}lo"

    def shape(self) -> tuple[int, int]:
        return int(self.heads) * int(self.rows), padded(self.cols)

    def grid(self) -> tuple[int, int, int]:
        return -(-int(self.rows) // BLOCK), -(-int(self.cols) // BLOCK), int(self.heads)

    def function(self, fn: str, i64: str) -> list[str]:
        """The jit function `fn` that writes this operand's planes."""
        hi, lo = self.names
        cp = padded(self.cols)
        return [
            "@triton.jit",
            f"def {fn}({self.src}, {hi}, {lo}, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):",
            f'    """{self.what} ({self.heads} x {self.rows} x {self.cols}) into TF32 parts hi + lo (each rounded to '
            f'nearest), row-major, rows of {cp}."""',
            f"    h = tl.program_id(2){i64}",
            f"    r = (tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)){i64}[:, None]",
            f"    c = (tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)){i64}[None, :]",
            f"    mask = (r < {self.rows}) & (c < {self.cols})",
            f"    x = tl.load({self.at}, mask=mask, other=0.0).to(tl.float32)",
            "    x_hi = _tf32(x)",
            f"    out = (h * {self.rows} + r) * {cp} + c",
            f"    tl.store({hi} + out, x_hi, mask=mask)",
            f"    tl.store({lo} + out, tl.where(x_hi == x, 0.0, _tf32(x - x_hi)), mask=mask)  # inf: lo 0, not NaN",
        ]


def split_info(kernel_name: str, planes: list[Planes]) -> dict:
    """What `KernelSource.split` holds: each split launch (function, grid, pointer parameters) and the planes."""
    return {"launches": [(f"{kernel_name}_split_{p.name.rsplit('_', 1)[-1]}", p.grid(), (p.src, *p.names))
                         for p in planes],
            "planes": [(n, p.shape()) for p in planes for n in p.names]}
