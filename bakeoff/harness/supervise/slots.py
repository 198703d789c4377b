"""Worker slots: where each of `--jobs N` parallel workers runs, and which timing gate it shares.

On a CUDA host each slot is pinned to one GPU with CUDA_VISIBLE_DEVICES and gets device "cuda:0";
slots are dealt to the visible GPUs in turn (`--jobs` = number of GPUs gives one worker per GPU).
On the CPU all slots share the one "cpu" gate. Gates are files under a host-wide folder, so two
bakeoff runs on one host respect each other's timing too. See docs/SCALING.md.
"""
from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

ENV_GATE_DIR = "BAKEOFF_GATE_DIR"
# "device" (default): one gate per GPU and one for the CPU. "host": one gate for the whole host, so that
# no compile anywhere on it overlaps any timing (stricter for launch-bound GPU cases; GPUs then time in turn).
ENV_GATE_SCOPE = "BAKEOFF_GATE_SCOPE"


class DeviceUnavailable(ValueError):
    """The device asked for is not on this host (no CUDA device visible, or not that many)."""


@dataclass(frozen=True)
class Slot:
    """Where one worker runs.

    label: kept in each record as `worker` ("cpu#1", "gpu3", "ray:10.0.0.5/gpu0").
    device: the device string the worker is given; None keeps the case's own.
    env: environment variables the worker gets on top of the orchestrator's.
    gate: path prefix of the device's timing gate (harness/supervise/gate.py); None runs ungated.
    """

    label: str
    device: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    gate: str | None = None


def gate_prefix(device_key: str) -> str:
    """The gate files' prefix for a device of this host ("cpu", "gpu-3", "gpu-GPU-8f2e..."), or for the
    whole host when BAKEOFF_GATE_SCOPE=host."""
    scope = os.environ.get(ENV_GATE_SCOPE, "device")
    if scope not in ("device", "host"):
        raise ValueError(f"{ENV_GATE_SCOPE} must be device or host, not {scope!r}")
    folder = Path(os.environ.get(ENV_GATE_DIR) or Path(tempfile.gettempdir()) / "bakeoff-gates")
    return str(folder / ("host" if scope == "host" else re.sub(r"[^A-Za-z0-9_.-]", "_", device_key)))


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES entries (indices or UUIDs)."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None and listed.strip():
        return [g.strip() for g in listed.split(",") if g.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def local_slots(device: str, jobs: int) -> list[Slot]:
    """`jobs` slots for cases on `device` ("cpu", "cuda" or "cuda:N") on this host."""
    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1, not {jobs}")
    if not device.startswith("cuda"):
        return [Slot(f"cpu#{i}", None, (), gate_prefix("cpu")) for i in range(jobs)]
    gpus = visible_gpus()
    if not gpus:
        raise DeviceUnavailable(f"device {device} asked for, but no CUDA device is visible")
    if ":" in device:
        index = int(device.split(":")[1])
        if index >= len(gpus):
            raise DeviceUnavailable(f"device {device} asked for, but only {len(gpus)} GPU(s) are visible")
        gpus = [gpus[index]]
    if jobs == 1:  # one worker: leave the device as the config names it
        return [Slot(f"gpu{gpus[0]}", None, (), gate_prefix(f"gpu-{gpus[0]}"))]
    slots = []
    for i in range(jobs):
        gpu = gpus[i % len(gpus)]
        label = f"gpu{gpu}" + (f"#{i // len(gpus)}" if jobs > len(gpus) else "")
        slots.append(Slot(label, "cuda:0", (("CUDA_VISIBLE_DEVICES", gpu),), gate_prefix(f"gpu-{gpu}")))
    return slots
