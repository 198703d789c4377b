"""A case's timing settings: the config's `timing` section, validated once, carried by every case
(plan/cases.py `Case.timing`) and read by name by the timer (measure/figures.py), the gate policy and the
supervisor; this model owns their defaults.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, Mapping

from pydantic import Field, model_validator

from bakeoff.harness.config.strict import Strict

# `sustained_s: auto` on a GPU: seconds of continuous load (the case's own calls, back to back) before the timer.
# A power-capped GPU boosts its SM clock when load starts and lowers it once power and temperature catch up, so a
# compute-bound call timed right after a compile (the device idle) reads faster than the same call in a model's
# steady loop (on the H200, GEMM and attention figures 3-9% below triton.testing.do_bench's 350 ms loop;
# docs/EVIDENCE.md). 0.3 s closed most of that gap there while adding about a third of a second per case; it is
# a compromise with run time, not the time the clock takes to settle, which `benchmarks/validate_timing.py
# --clock-settle` measures on a given GPU. On the CPU, auto is no load (0 s).
AUTO_SUSTAINED_S = 0.3


class TimingConfig(Strict):
    """How latency is measured. Times in seconds; the target is IQR/median."""

    warmup_s: float = Field(0.2, ge=0, le=60)
    budget_s: float = Field(1.0, gt=0, le=600)
    min_reps: int = Field(5, ge=1, le=100_000)
    max_reps: int = Field(10_000, ge=1, le=1_000_000)
    target_iqr: float = Field(0.05, gt=0, le=1)
    flush_l2: bool = True
    cuda_graph: bool = True
    profile: bool = True
    # Calls profiled by CUPTI per target (the headline's distribution on a GPU), and seconds of continuous
    # load before the timer (auto: AUTO_SUSTAINED_S on a GPU, none on the CPU), topped up before the CUPTI
    # pass (at most measure.figures.TOP_UP_S); the clock during sampling is recorded either way.
    profile_calls: int = Field(20, ge=3, le=10_000)
    sustained_s: Annotated[float, Field(ge=0, le=600)] | Literal["auto"] = "auto"
    # What a timing phase waits for (harness/supervise/gate.py): exclusive = every other worker on the device;
    # timers_only = only other timing phases; beside_compiles = every other worker's device work, not its
    # host-side compiles and imports; auto = beside_compiles on a GPU with the CUPTI pass, else exclusive
    # (supervise/gate_policy.py). profiler_warmup: start CUPTI in the pre-started worker, before the case.
    gate: Literal["auto", "exclusive", "timers_only", "beside_compiles"] = "auto"
    profiler_warmup: bool = True

    @classmethod
    def of(cls, value: "TimingConfig | Mapping[str, Any]") -> "TimingConfig":
        """`value` itself, or a mapping of settings validated (those it lacks take their defaults)."""
        return value if isinstance(value, cls) else cls.model_validate(dict(value))

    @model_validator(mode="after")
    def _reps(self) -> "TimingConfig":
        if self.min_reps > self.max_reps:
            raise ValueError("min_reps must not exceed max_reps")
        return self
