"""Launch configurations per kernel kind: the one fixed config for the interpreter, the GPU search space, grids.

A config is a dict of the kernel's constexpr block sizes plus `num_warps` and `num_stages`.
"""
from __future__ import annotations

from bakeoff.backends.tritongen.source import KernelSource

Config = dict[str, int]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _pow2(x: int) -> int:
    return 1 << max(x - 1, 0).bit_length()


def fixed(src: KernelSource) -> Config:
    """The interpreter's config: small tiles, since every program runs in NumPy on the CPU."""
    kind, s = src.kernel.kind, src.sizes
    if kind in ("pointwise", "copy"):
        return {"BLOCK": min(1024, _pow2(s["numel"])), "num_warps": 4, "num_stages": 1}
    if kind == "rowreduce":
        return {"BLOCK_M": 4, "BLOCK_N": min(s["block_n"], 64) if src.variant == "looped" else s["block_n"],
                "num_warps": 4, "num_stages": 1}
    if kind == "matmul":
        return {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 4, "num_warps": 4, "num_stages": 1}
    return {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 4, "num_stages": 1}


# Pruned search: the first few candidates of each kind's ordered list (the orders put the configs that won on
# the H200 first, see NOTES.md); the wide search times them all.
PRUNED = {"pointwise": 2, "copy": 1, "rowreduce": 2, "matmul": 2, "attention": 2}


def candidates(src: KernelSource, dtype: str, device: str = "cuda", sms: int | None = None,
               wide: bool = True) -> list[Config]:
    """The GPU search space of one kernel on `device` (H100/H200-sized tiles, trimmed to the problem), best
    first; `wide` False keeps the first PRUNED[kind]. `sms`: multiprocessors for persistent grids (default: read
    off `device`)."""
    out = _space(src, dtype, device, sms)
    return out if wide else out[:PRUNED[src.kernel.kind]]


def _space(src: KernelSource, dtype: str, device: str, sms: int | None) -> list[Config]:
    kind, s = src.kernel.kind, src.sizes
    if kind in ("pointwise", "copy"):
        out = [{"BLOCK": b, "num_warps": w, "num_stages": 1} for b, w in ((1024, 4), (4096, 8))]
        return [c for c in out if c["BLOCK"] <= max(128, _pow2(s["numel"]))] or out[:1]
    if kind == "rowreduce":
        if src.variant == "looped":
            return [{"BLOCK_M": 1, "BLOCK_N": b, "num_warps": w, "num_stages": 1} for b, w in
                    ((1024, 4), (2048, 8), (4096, 8))]
        bn = s["block_n"]
        out = []
        for bm, w in ((2, 8), (1, 4), (1, 8), (4, 16)):
            if bm * bn <= 32768 and bm <= _pow2(s["rows"]) and w * 32 <= max(bm * bn, 128):
                out.append({"BLOCK_M": bm, "BLOCK_N": bn, "num_warps": w, "num_stages": 1})
        out = out or [{"BLOCK_M": 1, "BLOCK_N": bn, "num_warps": 4, "num_stages": 1}]
        sms = sms or _sm_count(device)
        if s["rows"] >= 8 * sms:  # enough rows to walk: the row-loop twins, as many programs as stay resident
            # (<= 128 registers a thread: 16 warps a multiprocessor), so no program waits for a slot
            rows = [{**c, "ROWS": 1, "NUM_PROGRAMS": sms * 512 // (32 * c["num_warps"])}
                    for c in out if c["BLOCK_M"] <= 2 and c["num_warps"] in (4, 8)]
            out = out + sorted(rows, key=lambda c: -c["num_warps"])  # measured slower on the H200: wide only
        return out
    if kind == "matmul":
        tiles = ((128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (128, 128, 64, 8, 4), (64, 128, 64, 4, 4),
                 (64, 64, 32, 4, 4))
        if dtype == "float32":  # SIMT ieee by default (fp32_dot auto); tf32x3 runs three wgmma per K step
            tiles = ((128, 128, 32, 8, 3), (128, 256, 32, 8, 3), (64, 128, 32, 4, 3), (64, 64, 32, 4, 3))
        out = [{"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8, "num_warps": w, "num_stages": st}
               for m, n, k, w, st in tiles
               if m <= max(64, _pow2(s["m"])) and n <= max(64, _pow2(s["n"])) and k <= max(32, _pow2(s["k"]))]
        big = [c for c in out if c["BLOCK_M"] * c["BLOCK_N"] >= 128 * 128]
        out = (big if s["m"] * s["n"] >= 2048 * 2048 and big else out)[:2]
        if src.variant == "tma":  # 16-bit: persistent TMA first (it won on the H200), pointers, then the rest;
            sms = sms or _sm_count(device)  # float32: pointers first (TMA lost there)
            ptma = [{**c, "TMA": 2, "NUM_SMS": sms} for c in out[:2]]
            tma = [{**c, "TMA": 1} for c in out[:2]]
            out = ([out[0], ptma[0]] if dtype == "float32" else [ptma[0], out[0]]) + ptma[1:] + out[1:] + tma
        return out or [{"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 4, "num_stages": 3}]
    return _attention(src, dtype)


def _attention(src: KernelSource, dtype: str) -> list[Config]:
    """Flash-attention tiles: 128-row query blocks over 8 warps (two wgmma warpgroups) for 16-bit inputs; float32
    (three TF32 products per dot under tf32x3, whose split operands take registers) gets 64-row blocks.
    Order: what won on the H200 first (16-bit: pointer tiles; float32: the TMA twin), then the rest."""
    s = src.sizes
    tiles = ((128, 128, 8, 3), (128, 64, 8, 3), (128, 128, 8, 2), (64, 64, 4, 3))
    if dtype == "float32" or s["d"] > 128:
        tiles = ((64, 32, 4, 2), (64, 16, 4, 2), (64, 64, 4, 2), (32, 32, 4, 2))
    out = [{"BLOCK_M": m, "BLOCK_N": n, "num_warps": w, "num_stages": st} for m, n, w, st in tiles
           if m <= max(16, _pow2(s["sq"]))]
    out = (out[:3] if s["sq"] >= 1024 else out) or [{"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 4, "num_stages": 2}]
    if src.variant == "tma":  # TMA won for float32 (64 x 32 tiles) and lost for 16-bit inputs on the H200
        tma = [{**c, "TMA": 1} for c in out[:2]]
        out = tma[:1] + out[:1] + tma[1:] + out[1:] if dtype == "float32" else out[:2] + tma + out[2:]
    return out


def grid(src: KernelSource, cfg: Config) -> tuple[int, ...]:
    """The launch grid of `src` under `cfg` (plain ints, also where the sizes are a sweep's SymDims)."""
    return tuple(int(x) for x in _grid(src, cfg))


def _grid(src: KernelSource, cfg: Config) -> tuple[int, ...]:
    kind, s = src.kernel.kind, src.sizes
    if kind in ("pointwise", "copy"):
        return (_cdiv(s["numel"], cfg["BLOCK"]),)
    if kind == "rowreduce":
        blocks = _cdiv(s["rows"], cfg["BLOCK_M"])
        return (min(blocks, cfg["NUM_PROGRAMS"]),) if cfg.get("ROWS") else (blocks,)
    if kind == "matmul":
        tiles = _cdiv(s["m"], cfg["BLOCK_M"]) * _cdiv(s["n"], cfg["BLOCK_N"])
        if cfg.get("TMA") == 2:
            return (min(tiles, cfg["NUM_SMS"]), 1)
        return (tiles, s["batch"])
    return (_cdiv(s["sq"], cfg["BLOCK_M"]), s["heads"])


def constexprs(src: KernelSource, cfg: Config) -> dict[str, int]:
    """The keyword arguments of a launch: constexprs (block sizes, derived flags; no num_warps/num_stages) and
    the source's runtime integer arguments (`src.runtime`: a sweep's swept dim)."""
    out = {k: v for k, v in cfg.items() if k not in ("num_warps", "num_stages", "TMA", "ROWS")}
    if src.kernel.kind == "matmul":
        out["EVEN_K"] = bool(src.sizes["k"] % cfg["BLOCK_K"] == 0)
    return {**out, **{name: int(value) for name, value in src.runtime.items()}}


def kernel_fn(module: object, src: KernelSource, cfg: Config):
    """The jit function `cfg` launches: the template's, its TMA twin (TMA=1, persistent TMA=2) or its row-loop
    twin (ROWS=1)."""
    suffix = "_rows" if cfg.get("ROWS") else {0: "", 1: "_tma", 2: "_ptma"}[cfg.get("TMA", 0)]
    return getattr(module, src.fn + suffix)


def _sm_count(device: str = "cuda") -> int:
    """Multiprocessors of CUDA `device` (the case's; persistent kernels launch one program per SM)."""
    import torch

    dev = torch.device(device)
    return torch.cuda.get_device_properties(dev.index if dev.index is not None else torch.cuda.current_device()
                                            ).multi_processor_count
