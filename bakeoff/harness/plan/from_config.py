"""Config -> cases: the device and preset resolved, the command line's filters applied, the workloads resolved
(plan/workloads.py) and the matrix planned (plan/cases.py). The orchestrator plans a run (and a resumed one)
through `build_cases` only.
"""
from __future__ import annotations

from dataclasses import dataclass

from bakeoff.backends import known, names

from bakeoff.harness.config.backend_options import check_backends
from bakeoff.harness.config.schema import Config, LocatedYaml
from bakeoff.harness.config.yaml_lines import ConfigError
from bakeoff.harness.plan.cases import Case, plan_cases
from bakeoff.harness.plan.workloads import resolve_workloads


@dataclass(frozen=True)
class Filters:
    """Command-line narrowing of a config (None = keep all)."""

    backends: tuple[str, ...] | None = None
    workloads: tuple[str, ...] | None = None
    device: str | None = None
    preset: str | None = None
    gate: str | None = None  # the timing gate policy (timing.gate), overriding the config's


def build_cases(cfg: Config, where: LocatedYaml, filters: Filters,
                extend_backends: bool = False) -> tuple[str, list[Case]]:
    """Resolve the device and preset, apply the filters, and plan. Returns (device, cases).

    `--backend` narrows the config to some of its labels; a name the config lacks is a ConfigError, unless
    `extend_backends` (the built-in default config), where any registered backend may be named and is added."""
    device = resolve_device(filters.device or cfg.device)
    preset = resolve_preset(filters.preset or cfg.preset, device)
    if filters.gate:
        cfg = cfg.model_copy(update={"timing": cfg.timing.model_copy(update={"gate": filters.gate})})
    if filters.backends:
        for name in filters.backends:
            if name in cfg.backends:
                continue
            if not extend_backends:
                raise ConfigError(where.file, None, "backends",
                                  f"--backend {name[:60]!r} is not a backend of this config; its labels: "
                                  f"{', '.join(cfg.backends)}")

            if not known(name):
                raise ConfigError(where.file, None, "backends",
                                  f"--backend {name[:60]!r} is unknown; known: {', '.join(names())}")
        cfg = cfg.model_copy(update={"backends": {b: cfg.backends.get(b, {}) for b in filters.backends}})
        check_backends(cfg.backends, where)  # a backend --backend added: it must load, with default options
    workloads = resolve_workloads(cfg, where, preset, device)
    if filters.workloads:
        missing = set(filters.workloads) - {w.name for w in workloads}
        if missing:
            raise ConfigError(where.file, None, "workloads",
                              f"--workload {sorted(missing)[0][:60]!r} is not in this config "
                              f"(it has {', '.join(w.name for w in workloads)})")
        workloads = [w for w in workloads if w.name in filters.workloads]
    return device, plan_cases(cfg, workloads, device)


def resolve_device(device: str) -> str:
    """'auto' -> 'cuda' when a CUDA device is present, else 'cpu'."""
    if device != "auto":
        return device
    import torch  # heavy: only for `auto`

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_preset(preset: str, device: str) -> str:
    """'auto' -> 'gpu' on CUDA, 'cpu' on the CPU."""
    if preset != "auto":
        return preset
    return "cpu" if device == "cpu" else "gpu"
