"""IREE's compile-flag presets (`IreeOptions.preset`): what IREE's documentation asks a user to pass for speed.

iree-compile's default optimization level is O0 ("minimal or no optimizations": poor runtime performance,
iree.dev reference/optimization-options); `--iree-opt-level` sets the defaults of the flags nested under it
(constant hoisting and evaluation, data tiling at O2 and up, ...), and the same page names aggressive
dispatch-creation fusion as a separate switch. The CUDA deployment guide (iree.dev guides/deployment-
configurations/gpu-cuda) points to the same options.

What the flags do not change, read from iree-compile 3.13's dumped dispatches for CUDA
(`--iree-hal-dump-executable-files-to`) at the suite's `gpu` sizes: a bf16 GEMM runs the TileAndFuse pipeline
on `mma.sync` m16n8k16 tensor cores (128x64 workgroup tile, 4 warps, K step 32, shared memory filled by
plain loads and read without ldmatrix; no cp.async, no wgmma: the CUDA target has no sm_90), the same at O0
and O3, and the same for sm_80 and sm_89 (the two differ in the shared-memory limit and fp8 MMA only);
float32 GEMMs have no tensor-core op at all (SIMT, 16 outputs per thread). `--iree-opt-data-tiling` does not
apply to CUDA. Attention is the large gap, and is the `attention` option's (iree_attention.py), not a flag's.
The GPU pipeline switch `--iree-codegen-llvmgpu-use-tile-and-fuse-matmul=false` (GEMMs through
VectorDistribute, 64x64x64 tiles) measured within 1% of the default on the H200 (configs/h200_iree_ab.yaml,
docs/EVIDENCE.md); it and horizontal fusion of contractions (one dispatch for Q, K and V; not measured) are
left to `extra_flags`.

- tuned (default): `--iree-opt-level=O3 --iree-dispatch-creation-enable-aggressive-fusion=true`, on every target.
- plain: no optimization flags: iree-compile's own defaults (O0).
"""
from __future__ import annotations

PRESETS: dict[str, tuple[str, ...]] = {
    "tuned": ("--iree-opt-level=O3", "--iree-dispatch-creation-enable-aggressive-fusion=true"),
    "plain": (),
}


def preset_flags(preset: str) -> list[str]:
    """iree-compile flags of `preset` ("tuned" or "plain"); the caller appends the user's `extra_flags` after
    them, so a user's flag overrides the preset's."""
    if preset not in PRESETS:
        raise ValueError(f"iree preset must be one of {sorted(PRESETS)}, got {preset!r}")
    return list(PRESETS[preset])


def preset_note(preset: str) -> str:
    """The record's words for `preset`."""
    flags = " ".join(PRESETS[preset]) or "none: iree-compile's defaults (O0)"
    return f"preset={preset}: {flags}"
