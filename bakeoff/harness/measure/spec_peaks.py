"""Spec-sheet peaks of known GPUs, recorded beside the measured ceilings: dense (no sparsity) matmul TFLOP/s
per dtype and memory bandwidth, from NVIDIA's datasheets. float32 is the non-tensor-core FP32 peak: bakeoff
runs float32 without TF32, as PyTorch does by default. An unknown GPU has none (an empty dict), never a guess.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SpecPeak:
    """One GPU's datasheet figures: TFLOP/s by dtype name (dense), memory bandwidth in GB/s."""

    product: str
    matmul_tflops: dict[str, float]
    memory_gbps: float


# Matched against torch.cuda.get_device_name() by substring, first match wins: longer names first
# ("H200 NVL" before "H200", "H100 PCIe" before "H100").
_TABLE: tuple[tuple[str, SpecPeak], ...] = (
    ("H200 NVL", SpecPeak("NVIDIA H200 NVL", {"bfloat16": 835.5, "float16": 835.5, "float32": 60.0}, 4800.0)),
    ("H200", SpecPeak("NVIDIA H200 SXM", {"bfloat16": 989.4, "float16": 989.4, "float32": 67.0}, 4800.0)),
    ("H100 NVL", SpecPeak("NVIDIA H100 NVL", {"bfloat16": 835.5, "float16": 835.5, "float32": 60.0}, 3900.0)),
    ("H100 PCIe", SpecPeak("NVIDIA H100 PCIe", {"bfloat16": 756.5, "float16": 756.5, "float32": 51.2}, 2000.0)),
    ("H100", SpecPeak("NVIDIA H100 SXM", {"bfloat16": 989.4, "float16": 989.4, "float32": 67.0}, 3350.0)),
    ("A100-SXM4-80GB", SpecPeak("NVIDIA A100 SXM4 80GB", {"bfloat16": 312.0, "float16": 312.0, "float32": 19.5},
                                2039.0)),
    ("L4", SpecPeak("NVIDIA L4", {"bfloat16": 121.0, "float16": 121.0, "float32": 30.3}, 300.0)),
)


def spec_peak(gpu_name: str | None) -> SpecPeak | None:
    """The datasheet figures of the GPU named `gpu_name`, or None when it is not in the table."""
    if not gpu_name:
        return None
    for key, peak in _TABLE:
        if key in gpu_name:
            return peak
    return None


def spec_ceilings(gpu_name: str | None, dtypes: list[str]) -> list[tuple[str, float, str, str]]:
    """Ceiling rows (name, value, unit, method) from the datasheet: spec_copy_gbps (memory bandwidth: a copy
    moving read + write bytes at full bandwidth reaches it) and spec_matmul_tflops_<dtype>; [] if unknown."""
    peak = spec_peak(gpu_name)
    if peak is None:
        return []
    source = f"spec sheet: {peak.product}"
    rows = [("spec_copy_gbps", peak.memory_gbps, "GB/s", f"{source}, memory bandwidth")]
    rows += [(f"spec_matmul_tflops_{d}", peak.matmul_tflops[d], "TFLOP/s",
              f"{source}, dense {d}" + (" (FP32, no tensor cores)" if d == "float32" else " tensor core"))
             for d in dtypes if d in peak.matmul_tflops]
    return rows
