"""IREE's compile-flag presets (`IreeOptions.preset`): what IREE's documentation asks a user to pass for speed.

iree-compile's default optimization level is O0 ("minimal or no optimizations": poor runtime performance,
iree.dev reference/optimization-options); `--iree-opt-level` sets the defaults of the flags nested under it
(constant hoisting and evaluation, data tiling at O2 and up, ...), and the same page names aggressive
dispatch-creation fusion as a separate switch. The CUDA deployment guide (iree.dev guides/deployment-
configurations/gpu-cuda) points to the same options. IREE's GPU codegen pipelines (vector distribution, tile
and fuse) are chosen per dispatch by the compiler; their `--iree-codegen-llvmgpu-use-*` switches are test
flags, left to `extra_flags` (configs/h200_iree_ab.yaml measures them).

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
