"""Launch configurations per kernel kind: the one fixed config for the interpreter, the GPU search space, grids.

A config is a dict of the kernel's constexpr block sizes plus `num_warps` and `num_stages`.
"""
from __future__ import annotations

from bakeoff.backends.tritongen.codegen_split import BLOCK
from bakeoff.backends.tritongen.codegen_rowreduce import COMPENSATE_OVER
from bakeoff.backends.tritongen.codegen_splitk import EPI_M, EPI_N, UNROLL, split_count
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
# the H200 first, see NOTES.md); the wide search times them all. Pointwise: the first (1024 elements, 4 warps)
# won all six pointwise searches of two three-dtype H200 runs, each by about 1%, so the pruned search compiles it
# alone and times nothing (a one-candidate search is not timed).
PRUNED = {"pointwise": 1, "copy": 1, "rowreduce": 2, "matmul": 2, "attention": 2}
# Twins whose first candidate won every H200 search by far more than the search's noise, searched alone (compiled,
# checked to load, not timed; where it does not, the search falls back to the rest of the list), from the records
# of two `--jobs 8` runs of configs/h200_tritongen_dtypes.yaml (threads, then compile workers):
# - the Gluon attention kernel (`gluon`): 8 of 8 searches (attention, attn_block; bf16, fp16), best rounds 1.25-1.33x
#   faster than the template's second candidate (1.76-1.83 against 2.27-2.39 ms; 0.506-0.513 against 0.674-0.681);
# - the pre-split float32 attention's 64 x 32 tile (`split_attention`): 4 of 4 (attention, attn_block), 1.19x and
#   more (18.8-19.0 against 22.5-22.6 ms);
# - the pre-split float32 matmul (`split_matmul`): its second tile then (128 x 128 x 16, CHAIN 2, 4 stages, since
#   dropped from _SPLIT_TILES) needs 262208 bytes of shared memory against sm_90's 232448 and failed at its first
#   launch in all 10 searches, so the pruned search was the first tile alone (where split-K applies, a long K, its
#   candidates stay beside it);
# - the persistent TMA kernel of a 16-bit matmul (`ptma`, first in its list): 10 of 10 searches (GEMM+epilogues,
#   the blocks' projections; bf16, fp16) in an H100 run whose rounds had the device alone, 0.5-10% ahead of the
#   pointer kernel in its best round and ahead in every round; where rounds shared the device with other cases,
#   each won some searches, in rounds up to 2.5x apart.
PRUNED_TWINS = {"gluon": 1, "split_attention": 1, "split_matmul": 1, "ptma": 1}


def pruned_count(src: KernelSource, space: list[Config]) -> int:
    """How many of the ordered list `space` the pruned search compiles: PRUNED_TWINS for the twins there (split-K
    candidates after a pre-split matmul's first stay), else PRUNED[kind]."""
    kind = src.kernel.kind
    if kind == "attention" and src.gluon:
        return PRUNED_TWINS["gluon"]
    if kind == "attention" and src.split:
        return PRUNED_TWINS["split_attention"]
    if kind == "matmul" and src.split:
        n = PRUNED_TWINS["split_matmul"]
        return n + len([c for c in space[n:n + PRUNED[kind] - n] if c.get("SPLIT_K")])
    if kind == "matmul" and space and space[0].get("TMA") == 2:  # 16-bit: the persistent TMA kernel first
        return PRUNED_TWINS["ptma"]
    if kind == "rowreduce" and len(space) > 2 and space[0].get("LOOP") and not space[2].get("LOOP"):
        # float32 rows (looped twins first): the first persistent config too. The winner differs by GPU: the
        # twin on the H200 (softmax 131.5 us against 133.4 persistent), the persistent kernel on the H100
        # (softmax 0.1819 ms at 1 row / 4 warps against the twins' 0.1872-0.1876)
        return PRUNED[kind] + 1
    return PRUNED[kind]


def candidates(src: KernelSource, dtype: str, device: str = "cuda", sms: int | None = None,
               wide: bool = True) -> list[Config]:
    """The GPU search space of one kernel on `device` (H100/H200-sized tiles, trimmed to the problem), best
    first; `wide` False keeps the first `pruned_count`. `sms`: multiprocessors for persistent grids
    (default: read off `device`)."""
    out = _space(src, dtype, device, sms)
    return out if wide else out[:pruned_count(src, out)]


def _space(src: KernelSource, dtype: str, device: str, sms: int | None) -> list[Config]:
    kind, s = src.kernel.kind, src.sizes
    if kind in ("pointwise", "copy"):
        out = [{"BLOCK": b, "num_warps": w, "num_stages": 1} for b, w in ((1024, 4), (4096, 8))]
        return [c for c in out if c["BLOCK"] <= max(128, _pow2(s["numel"]))] or out[:1]
    if kind == "rowreduce":
        return _rowreduce(src, dtype, device, sms)
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
        splitk = _split_k(src, dtype, device, sms, out)
        if src.split:  # float32: the pre-split 3xTF32 twins first, then the SIMT pointer kernel, then the rest
            split = _split_tiles(src)
            return split[:1] + splitk + split[1:] + out[:1] + _tma_twins(src, dtype, device, sms, out[1:])
        if splitk:  # split-K first: the tiles alone leave most multiprocessors idle, or K is too long to chain
            return splitk + out
        if src.variant == "tma":  # 16-bit: persistent TMA first (it won on the H200), pointers, then the rest;
            sms = sms or _sm_count(device)  # float32: pointers first (TMA lost there)
            ptma = [{**c, "TMA": 2, "NUM_SMS": sms} for c in out[:2]]
            tma = [{**c, "TMA": 1} for c in out[:2]]
            out = ([out[0], ptma[0]] if dtype == "float32" else [ptma[0], out[0]]) + ptma[1:] + out[1:] + tma
        return out or [{"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 4, "num_stages": 3}]
    return _attention(src, dtype)


def _rowreduce(src: KernelSource, dtype: str, device: str, sms: int | None) -> list[Config]:
    """A row kernel's ordered configs: rows per program and warps, the row-loop twins, the looped twins."""
    s = src.sizes
    if src.variant == "looped":
        return [{"BLOCK_M": 1, "BLOCK_N": b, "num_warps": w, "num_stages": 1} for b, w in
                ((1024, 4), (2048, 8), (4096, 8))]
    bn = s["block_n"]
    out = []
    # 1 row / 4 warps first: on the H200 (16384 x 4096) it was the best of these configs or within 1% of it for
    # LayerNorm+GELU (bf16, fp16), softmax and RMSNorm (bf16), whatever the masks; 2 / 8 rose to 79 registers
    # in LN+GELU bf16 (85.9 against 77.5 us)
    # 2 rows / 4 warps (16-bit rows of 1024 or more, behind a looped twin: outside every pruned search): a thread
    # holds the same columns of both rows, so the per-column inputs (LayerNorm's w and b) load and unpack once for
    # two rows: 23.7 SASS instructions an element against 25.6 for LN+GELU bf16 (Triton 3.6, sm_90, offline) at
    # 167 registers, 3 programs a multiprocessor holding the bytes 1 / 4's six do; not timed yet
    pairs = ((1, 4), (2, 8)) + (((2, 4),) if dtype != "float32" and bn >= 1024 else ()) + ((1, 8), (4, 16))
    for bm, w in pairs:
        if bm * bn <= 32768 and bm <= _pow2(s["rows"]) and w * 32 <= max(bm * bn, 128):
            out.append({"BLOCK_M": bm, "BLOCK_N": bn, "num_warps": w, "num_stages": 1})
    out = out or [{"BLOCK_M": 1, "BLOCK_N": bn, "num_warps": 4, "num_stages": 1}]
    sms = sms or _sm_count(device)
    if s["rows"] >= 8 * sms:  # enough rows to walk: the row-loop twins, as many programs as stay resident
        # (<= 128 registers a thread, at most 32 elements a thread: 16 warps a multiprocessor), so no program
        # waits for a slot
        rows = [{**c, "ROWS": 1, "NUM_PROGRAMS": sms * 512 // (32 * c["num_warps"])}
                for c in out if c["BLOCK_M"] <= 2 and c["num_warps"] in (4, 8)
                and c["BLOCK_M"] * bn <= 32 * 32 * c["num_warps"]]
        out = out + sorted(rows, key=lambda c: -c["num_warps"])  # measured slower on the H200: wide only
    if bn >= 1024:
        # float32: the looped twin first, at 8 then 16 warps (H200, 16384 x 4096, interleaved with Inductor:
        # softmax 131.5 us at 8 warps, 152 at 16, 133.4 persistent; RMSNorm 130.8 at 8, 128.9 at 16 (Inductor
        # 128.8), 134.7 persistent); 16-bit: second (it won RMSNorm; softmax and LN+GELU reload and lose)
        fp32 = dtype == "float32"
        loops = [{"BLOCK_M": 1, "BLOCK_N": b, "num_warps": w, "num_stages": 1, "LOOP": 1}
                 for b, w in ((bn // 2, 8),) + (((bn // 2, 16),) if fp32 else ()) + ((bn // 4, 4),)]
        out = loops[:2] + out + loops[2:] if fp32 else out[:1] + loops[:1] + out[1:] + loops[1:]
    return out


def _split_k(src: KernelSource, dtype: str, device: str, sms: int | None, out: list[Config]) -> list[Config]:
    """Split-K configs (SPLIT_K > 1: codegen_splitk.py) where the tiles would not fill the device or K is too
    long for one slice; [] otherwise. Tiles: 128 x 128 and 64 x 128 on 4 warps, 4 stages (H100, 256 x 65536 x 256
    in 16 bits, against torch.mm: 0.944 and 0.946 of it at SPLIT_K 32, where the template's 128 x 256 on 8 warps
    reached 0.863 at 64 and 0.837 at 32, and 64 x 64 0.867 at 17); float32's 128 x 128 on 8 warps, 3 stages."""
    s = src.sizes
    if not s.get("splitk") or not out or int(s["k"]) < 4096:
        return []
    sms = sms or _sm_count(device)
    res = []
    fp32 = dtype == "float32"  # float32's SIMT dot: 128 x 128 on 4 warps spills (255 registers, sm_90 offline)
    bk = 32 if fp32 else 64
    for c in ({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": bk, "GROUP_M": 8, "num_warps": 8 if fp32 else 4,
               "num_stages": 3 if fp32 else 4},
              {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": bk, "GROUP_M": 8, "num_warps": 4, "num_stages": 4}):
        tiles = _cdiv(s["m"], c["BLOCK_M"]) * _cdiv(s["n"], c["BLOCK_N"])
        n = split_count(s["k"], tiles, sms)
        if n > 1 and c not in [{k: v for k, v in r.items() if k != "SPLIT_K"} for r in res]:
            res.append({**c, "SPLIT_K": n})
    return res


def _tma_twins(src: KernelSource, dtype: str, device: str, sms: int | None, rest: list[Config]) -> list[Config]:
    """`rest` (pointer configs) and, where the matmul has TMA twins, their persistent and plain TMA forms."""
    if src.variant != "tma" or not rest:
        return rest
    sms = sms or _sm_count(device)
    return rest + [{**rest[0], "TMA": 2, "NUM_SMS": sms}, {**rest[0], "TMA": 1}]


# The pre-split twin's tiles (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages, CHAIN): four float32 tiles a K step in
# shared memory, (2 * BM + 2 * BN) * BK * 4 bytes a stage, within ~227 KB on an H100/H200; an accumulator and a
# CHAIN partial sum in registers. Persistent forms ran 1.7x slower on the H200 and are not generated. Order: the
# H200's fastest at 8192^3 first (10.8 ms; CHAIN 1-4 gave the same error there). A 128 x 128 x 16 tile at 4
# stages with CHAIN 2 is not among them: it needs 262208 bytes of shared memory (sm_90 has 232448) and spills
# (offline sm_90), and failed at its first launch in every H200 search that tried it.
_SPLIT_TILES = ((128, 128, 32, 8, 3, 1), (64, 128, 32, 4, 4, 1), (128, 128, 32, 8, 2, 1), (64, 64, 32, 4, 3, 1))


def _split_tiles(src: KernelSource) -> list[Config]:
    """The pre-split 3xTF32 twin's configs (SPLIT=1, TMA=1), trimmed to the problem."""
    s = src.sizes
    out = [{"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8, "num_warps": w, "num_stages": st, "CHAIN": ch,
            "SPLIT": 1, "TMA": 1} for m, n, k, w, st, ch in _SPLIT_TILES
           if m <= max(64, _pow2(s["m"])) and n <= max(64, _pow2(s["n"])) and k * ch <= max(16, _pow2(s["k"]))]
    big = [c for c in out if c["BLOCK_M"] * c["BLOCK_N"] >= 128 * 128]
    return (big if s["m"] * s["n"] >= 2048 * 2048 and big else out) or out[-1:]


# The pre-split attention twin's tiles (BLOCK_M, BLOCK_N, warps, stages): Q's two planes stay in shared memory
# (BM x d x 8 bytes) beside each stage's four K and V^T tiles (BN x d x 16 bytes), within ~227 KB at d = 128.
_SPLIT_ATTENTION = ((64, 32, 4, 2), (64, 16, 4, 3), (128, 32, 8, 1))  # sm_90 offline: no spills in the first two


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
    # Hopper, 16-bit causal: the warp-specialised Gluon kernel first (its own fixed tiles and descriptors)
    first = [{"GLUON": 1, "BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 4, "num_stages": 1}] if src.gluon else []
    if src.split:  # float32: the pre-split 3xTF32 twin first, then Triton's in-kernel tf32x3
        return [{"BLOCK_M": m, "BLOCK_N": n, "num_warps": w, "num_stages": st, "SPLIT": 1}
                for m, n, w, st in _SPLIT_ATTENTION if m <= max(16, _pow2(s["sq"]))] + first + out
    if src.variant == "tma":  # TMA won for float32 (64 x 32 tiles) and lost for 16-bit inputs on the H200
        tma = [{**c, "TMA": 1} for c in out[:2]]
        out = tma[:1] + out[:1] + tma[1:] + out[1:] if dtype == "float32" else out[:2] + tma + out[2:]
    return first + out


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
        if cfg.get("SPLIT_K"):
            return (tiles, cfg["SPLIT_K"])
        if cfg.get("TMA") == 2:
            return (min(tiles, cfg["NUM_SMS"]), 1)
        return (tiles, s["batch"])
    return (_cdiv(s["sq"], cfg["BLOCK_M"]), s["heads"])


def constexprs(src: KernelSource, cfg: Config) -> dict[str, int]:
    """The keyword arguments of a launch: constexprs (block sizes, derived flags; no num_warps/num_stages) and
    the source's runtime integer arguments (`src.runtime`: a sweep's swept dim)."""
    out = {k: v for k, v in cfg.items() if k not in ("num_warps", "num_stages", "TMA", "ROWS", "SPLIT", "LOOP")}
    if src.kernel.kind == "matmul":
        out["EVEN_K"] = bool(src.sizes["k"] % cfg["BLOCK_K"] == 0)
    if src.kernel.kind == "rowreduce" and (src.variant == "looped" or cfg.get("LOOP")):
        out["COMPENSATE"] = _cdiv(src.sizes["cols"], cfg["BLOCK_N"]) > COMPENSATE_OVER
    return {**out, **_runtime(src)}


def _runtime(src: KernelSource) -> dict[str, int]:
    return {name: int(value) for name, value in src.runtime.items()}


def suffix(cfg: Config) -> str:
    """The name suffix of the jit function `cfg` picks: '' (the template), `_tma`/`_ptma` (TMA, persistent TMA),
    `_s3` (pre-split 3xTF32), `_rows` (row loop) or `_loop` (a row reduction's looped twin)."""
    if cfg.get("ROWS"):
        return "_rows"
    if cfg.get("LOOP"):
        return "_loop"
    if cfg.get("GLUON"):
        return "_gl"
    if cfg.get("SPLIT"):
        return "_s3"
    if cfg.get("SPLIT_K"):
        return "_skp"
    return {0: "", 1: "_tma", 2: "_ptma"}[cfg.get("TMA", 0)]


def kernel_fn(module: object, src: KernelSource, cfg: Config):
    """The jit function `cfg` launches last (the kernel itself; a pre-split twin's split launches come first)."""
    return getattr(module, src.fn + suffix(cfg))


def launches(src: KernelSource, cfg: Config) -> list[tuple[str, tuple[int, ...], tuple[str, ...], dict[str, int]]]:
    """Every launch `cfg` makes, in order: (jit function name, grid, pointer parameters, keyword arguments with
    num_warps and num_stages). A pre-split config (SPLIT=1) first splits the operands into their TF32 planes."""
    if cfg.get("GLUON"):  # gluon_attention.Launch: host descriptors, its own grid and constexprs
        return [(src.fn + "_gl", grid(src, cfg), src.gluon, {})]
    kwargs = {**constexprs(src, cfg), "num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]}
    if cfg.get("SPLIT_K"):
        params = src.params + tuple(name for name, _ in config_scratch(src, cfg))
        kwargs.pop("EVEN_K")
        tile = {"BLOCK_M": EPI_M, "BLOCK_N": EPI_N, "GROUP_M": cfg["GROUP_M"], "SPLIT_K": cfg["SPLIT_K"],
                "UNROLL": UNROLL}
        epi_grid = (_cdiv(src.sizes["m"], EPI_M) * _cdiv(src.sizes["n"], EPI_N),)
        return [(src.fn + "_skp", grid(src, cfg), params, kwargs),
                (src.fn + "_ske", epi_grid, params, {**tile, **_runtime(src), "num_warps": 4, "num_stages": 1})]
    if not cfg.get("SPLIT"):
        return [(src.fn + suffix(cfg), grid(src, cfg), src.params, kwargs)]
    split = {"BLOCK_R": BLOCK, "BLOCK_C": BLOCK, "num_warps": 4, "num_stages": 1, **_runtime(src)}
    planes = tuple(name for name, _ in config_scratch(src, cfg))
    return ([(fn, tuple(g), tuple(params), split) for fn, g, params in src.split["launches"]]
            + [(src.fn + suffix(cfg), grid(src, cfg), src.params + planes, kwargs)])


def config_scratch(src: KernelSource, cfg: Config) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """(name, shape) of the float32 buffers `cfg`'s launches write beside the plan's buffers: a pre-split
    config's operand planes, a split-K config's partial tiles (SPLIT_K x m x n)."""
    if cfg.get("SPLIT"):
        return src.scratch()
    if cfg.get("SPLIT_K"):
        return ((f"{src.fn}_part", (cfg["SPLIT_K"], int(src.sizes["m"]), int(src.sizes["n"]))),)
    return ()


def scratch(sources, configs) -> list[tuple[str, tuple[int, ...]]]:
    """The scratch buffers of every kernel under its chosen config."""
    return [b for src, cfg in zip(sources, configs) for b in config_scratch(src, cfg)]


def _sm_count(device: str = "cuda") -> int:
    """Multiprocessors of CUDA `device` (the case's; persistent kernels launch one program per SM)."""
    import torch

    dev = torch.device(device)
    return torch.cuda.get_device_properties(dev.index if dev.index is not None else torch.cuda.current_device()
                                            ).multi_processor_count
