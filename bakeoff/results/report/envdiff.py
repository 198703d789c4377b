"""What changed in the environment between two runs: GPU, driver, CUDA, library versions, harness revision."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Top-level environment fields worth naming when they differ, in the order they are reported.
FIELDS = ("gpu_name", "driver", "cuda_runtime", "compute_capability", "cpu_model", "python", "harness_rev")


@dataclass(frozen=True)
class EnvChange:
    """One field that differs: `field` is e.g. 'driver' or 'versions.torch'; None means absent."""

    field: str
    before: Any
    after: Any

    def __str__(self) -> str:
        return f"{self.field} {self.before if self.before is not None else '-'} → " \
               f"{self.after if self.after is not None else '-'}"


def env_diff(before: dict[str, Any] | None, after: dict[str, Any] | None,
             fields: tuple[str, ...] = FIELDS) -> list[EnvChange]:
    """Differences between two run environments: each of `fields` (top-level, in that order; by default
    hardware, driver, CUDA, Python, harness), then each package version (`versions.NAME`, sorted by name)."""
    a, b = before or {}, after or {}
    out = [EnvChange(f, a.get(f), b.get(f)) for f in fields if a.get(f) != b.get(f)]
    va, vb = a.get("versions") or {}, b.get("versions") or {}
    for name in sorted(set(va) | set(vb)):
        if va.get(name) != vb.get(name):
            out.append(EnvChange(f"versions.{name}", va.get(name), vb.get(name)))
    return out


def describe(changes: list[EnvChange]) -> str:
    """'driver 550.1 → 560.2; versions.torch 2.12 → 2.13', or 'no environment change'."""
    return "; ".join(str(c) for c in changes) if changes else "no environment change"
