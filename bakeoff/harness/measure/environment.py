"""The environment of a run (its fingerprint) and the GPU's state sampled around each case (NVML).

Versions are read from package metadata, not by importing: reading the environment must not import JAX
or TensorRT. Clocks and throttle reasons are only read, never set.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from bakeoff.backends import plugins
from bakeoff.results.hardware import hardware_id

PACKAGES = {"torch": "torch", "triton": "triton", "jax": "jax", "jaxlib": "jaxlib",
            "iree": "iree-base-runtime", "iree_compiler": "iree-base-compiler", "onnx": "onnx",
            "onnxruntime": "onnxruntime", "onnxruntime_gpu": "onnxruntime-gpu", "tensorrt": "tensorrt",
            "numpy": "numpy"}
# Fields that identify the machine and software; load and clocks vary run to run and are left out.
FINGERPRINT_KEYS = ("gpu_name", "gpu_memory_mb", "sm_count", "compute_capability", "driver", "cuda_runtime",
                    "cpu_model", "python", "versions", "harness_rev")
REPO_ROOT = Path(__file__).resolve().parents[3]


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def versions() -> dict[str, str | None]:
    """Each package's version (None: not installed), then each installed backend plugin as `plugin:NAME` ->
    its distribution and version (read from its entry point, not imported): a plugin upgraded between two runs
    changes the fingerprint, and resume, compare and the report name the change."""
    return {**{k: _version(v) for k, v in PACKAGES.items()}, **{f"plugin:{p.name}": p.dist for p in plugins()}}


def harness_revision() -> str:
    """The BAKEOFF_HARNESS_REV environment variable where set (a copy of a checkout, e.g. on a lent GPU machine,
    whose own .git, if any, is not the source's), else the git revision of the checkout with '+dirty' when it
    has uncommitted changes, else 'unknown'."""
    if os.environ.get("BAKEOFF_HARNESS_REV"):
        return os.environ["BAKEOFF_HARNESS_REV"]
    try:
        rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                             text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        if rev:
            return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return os.environ.get("BAKEOFF_HARNESS_REV") or "unknown"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _gpu_info(device_index: int) -> dict[str, Any]:
    import torch

    if not torch.cuda.is_available():
        return {}
    props = torch.cuda.get_device_properties(device_index)
    info: dict[str, Any] = {
        "gpu_name": props.name, "gpu_memory_mb": props.total_memory // 2**20,
        "sm_count": props.multi_processor_count, "compute_capability": f"{props.major}.{props.minor}",
        "cuda_runtime": torch.version.cuda,
    }
    nv = _nvml()
    if nv is not None:
        try:
            info["driver"] = nv.nvmlSystemGetDriverVersion()
            h = _nvml_handle(nv, device_index)
            info["power_limit_w"] = nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1000
            info["max_sm_clock_mhz"] = nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM)
        except Exception as exc:  # NVML errors are facts to record, not failures
            info["nvml_error"] = str(exc)
    return info


def _nvml_handle(nv: Any, device_index: int) -> Any:
    """NVML's handle for torch's device `device_index`, matched by UUID (NVML and CUDA may number GPUs
    differently, and CUDA_VISIBLE_DEVICES renumbers them); by index where the UUID is unavailable."""
    try:
        import torch

        uuid = str(torch.cuda.get_device_properties(device_index).uuid)
        return nv.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
    except Exception:
        return nv.nvmlDeviceGetHandleByIndex(_physical_index(device_index))


def _physical_index(device_index: int) -> int:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        ids = [v for v in visible.split(",") if v.strip()]
        if device_index < len(ids) and ids[device_index].strip().isdigit():
            return int(ids[device_index])
    return device_index


_NVML: Any = None


def _nvml() -> Any:
    """pynvml, initialized once; None when NVML is unavailable (no driver, no package)."""
    global _NVML
    if _NVML is None:
        try:
            import pynvml

            pynvml.nvmlInit()
            _NVML = pynvml
        except Exception:
            _NVML = False
    return _NVML or None


def environment(device: str) -> dict[str, Any]:
    """Everything known about this machine and its software, plus a `fingerprint` hash of the stable part."""
    index = int(device.split(":")[1]) if ":" in device else 0
    env: dict[str, Any] = {
        "device": device, "cpu_model": _cpu_model(), "cpu_count": os.cpu_count(),
        "load_avg": list(os.getloadavg()), "python": platform.python_version(), "platform": platform.platform(),
        "hostname": platform.node(), "versions": versions(),
        "harness_rev": harness_revision(),
    }
    if device.startswith("cuda"):
        env.update(_gpu_info(index))
    env["fingerprint"] = fingerprint(env)
    env["hardware_id"] = hardware_id(env)
    return env


def fingerprint(env: dict[str, Any]) -> str:
    """A 12-hex-digit hash of the fields that identify the machine and its software stack."""
    stable = {k: env.get(k) for k in FINGERPRINT_KEYS}
    stable["versions"] = {k: v for k, v in (env.get("versions") or {}).items()}
    return hashlib.sha256(json.dumps(stable, sort_keys=True, default=str).encode()).hexdigest()[:12]


def gpu_state(device: str) -> dict[str, Any] | None:
    """SM and memory clocks (MHz), temperature (C), power (W), utilization and throttle reasons, via NVML."""
    if not device.startswith("cuda"):
        return None
    nv = _nvml()
    if nv is None:
        return {"error": "NVML unavailable"}
    index = int(device.split(":")[1]) if ":" in device else 0
    try:
        h = _nvml_handle(nv, index)
        read_events = clock_events_reader(nv)
        if read_events is None:
            raise AttributeError("NVML has neither nvmlDeviceGetCurrentClocksEventReasons nor its older name")
        reasons = read_events(h)
        return {
            "sm_clock_mhz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
            "mem_clock_mhz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
            "temperature_c": nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
            "power_w": nv.nvmlDeviceGetPowerUsage(h) / 1000,
            "throttle_reasons": clock_event_names(nv, reasons),
        }
    except Exception as exc:
        return {"error": str(exc)}


def clock_events_reader(nv: Any) -> Any:
    """NVML's call that reads the clock event (throttle) reasons of a device handle, as a mask:
    nvmlDeviceGetCurrentClocksEventReasons, else its older name nvmlDeviceGetCurrentClocksThrottleReasons; None in
    an NVML with neither."""
    return (getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or getattr(nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None))


def clock_event_names(nv: Any, mask: int) -> list[str]:
    """NVML's clock event (throttle) reasons set in `mask`, by name ('SwPowerCap', 'GpuIdle'...); ['None'] for none."""
    names = []
    for attr in dir(nv):
        if attr.startswith("nvmlClocksThrottleReason") and attr not in ("nvmlClocksThrottleReasonAll",
                                                                        "nvmlClocksThrottleReasonNone"):
            bit = getattr(nv, attr)
            if isinstance(bit, int) and bit and mask & bit:
                names.append(attr.removeprefix("nvmlClocksThrottleReason"))
    return sorted(set(names)) or ["None"]
