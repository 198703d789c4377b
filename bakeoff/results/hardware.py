"""What "the same hardware" means across runs: the device kind, GPU model, memory, SM count and compute
capability, or the CPU model. Software versions and the harness revision are left out (the run fingerprint
hashes those), so that stored ceilings survive a new commit or a library upgrade, and a driver or library
change shows as a step inside one history series instead of starting a new one."""
from __future__ import annotations

import hashlib
import json
from typing import Any

HARDWARE_KEYS = ("device", "gpu_name", "gpu_memory_mb", "sm_count", "compute_capability", "cpu_model")


def hardware_id(env: dict[str, Any]) -> str:
    """An 8-hex-digit hash of the hardware part of an environment (see HARDWARE_KEYS)."""
    stable = {k: env.get(k) for k in HARDWARE_KEYS}
    stable["device"] = str(env.get("device") or "").split(":")[0]  # cuda:0 and cuda:1 of one model are one kind
    return hashlib.sha256(json.dumps(stable, sort_keys=True, default=str).encode()).hexdigest()[:8]
