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


def candidates(src: KernelSource, dtype: str, device: str = "cuda") -> list[Config]:
    """The GPU search space of one kernel on `device` (H100/H200-sized tiles, trimmed to the problem)."""
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
        for bm, w in ((1, 8), (2, 8), (4, 16), (1, 4)):
            if bm * bn <= 32768 and bm <= _pow2(s["rows"]) and w * 32 <= max(bm * bn, 128):
                out.append({"BLOCK_M": bm, "BLOCK_N": bn, "num_warps": w, "num_stages": 1})
        return out or [{"BLOCK_M": 1, "BLOCK_N": bn, "num_warps": 4, "num_stages": 1}]
    if kind == "matmul":
        tiles = ((128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (128, 128, 64, 8, 4), (64, 128, 64, 4, 4),
                 (64, 64, 32, 4, 4))
        if dtype == "float32":
            tiles = ((128, 128, 32, 8, 3), (64, 128, 32, 4, 3), (64, 64, 32, 4, 3))
        out = [{"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8, "num_warps": w, "num_stages": st}
               for m, n, k, w, st in tiles
               if m <= max(64, _pow2(s["m"])) and n <= max(64, _pow2(s["n"])) and k <= max(32, _pow2(s["k"]))]
        big = [c for c in out if c["BLOCK_M"] * c["BLOCK_N"] >= 128 * 128]
        out = (big if s["m"] * s["n"] >= 2048 * 2048 and big else out)[:2]
        if src.variant == "tma":  # the two 128 x 256 tiles again, through TMA, then TMA + persistent
            sms = _sm_count(device)
            out += [{**out[0], "TMA": 1}] + [{**c, "TMA": 2, "NUM_SMS": sms} for c in out[:2]]
        return out or [{"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 4, "num_stages": 3}]
    tiles = ((128, 64, 8, 3), (128, 128, 8, 3), (128, 128, 8, 2), (64, 64, 4, 3))
    if dtype == "float32" or s["d"] > 128:
        tiles = ((64, 32, 4, 2), (64, 64, 4, 2), (32, 32, 4, 2))
    out = [{"BLOCK_M": m, "BLOCK_N": n, "num_warps": w, "num_stages": st} for m, n, w, st in tiles
           if m <= max(16, _pow2(s["sq"]))]
    return (out[:3] if s["sq"] >= 1024 else out) or [{"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 4, "num_stages": 2}]


def grid(src: KernelSource, cfg: Config) -> tuple[int, ...]:
    """The launch grid of `src` under `cfg`."""
    kind, s = src.kernel.kind, src.sizes
    if kind in ("pointwise", "copy"):
        return (_cdiv(s["numel"], cfg["BLOCK"]),)
    if kind == "rowreduce":
        return (_cdiv(s["rows"], cfg["BLOCK_M"]),)
    if kind == "matmul":
        tiles = _cdiv(s["m"], cfg["BLOCK_M"]) * _cdiv(s["n"], cfg["BLOCK_N"])
        if cfg.get("TMA") == 2:
            return (min(tiles, cfg["NUM_SMS"]), 1)
        return (tiles, s["batch"])
    return (_cdiv(s["sq"], cfg["BLOCK_M"]), s["heads"])


def constexprs(src: KernelSource, cfg: Config) -> dict[str, int]:
    """The constexpr keyword arguments of a launch (block sizes, derived flags); no num_warps/num_stages."""
    out = {k: v for k, v in cfg.items() if k not in ("num_warps", "num_stages", "TMA")}
    if src.kernel.kind == "matmul":
        out["EVEN_K"] = src.sizes["k"] % cfg["BLOCK_K"] == 0
    return out


def kernel_fn(module: object, src: KernelSource, cfg: Config):
    """The jit function `cfg` launches: the template's, or its TMA twin when the config says TMA."""
    return getattr(module, src.fn + {0: "", 1: "_tma", 2: "_ptma"}[cfg.get("TMA", 0)])


def _sm_count(device: str = "cuda") -> int:
    """Multiprocessors of CUDA `device` (the case's; persistent kernels launch one program per SM)."""
    import torch

    dev = torch.device(device)
    return torch.cuda.get_device_properties(dev.index if dev.index is not None else torch.cuda.current_device()
                                            ).multi_processor_count
