"""A workload entry's shape sweep: one symbolic dim served at several values by one case.

    workloads:
      - name: attention
        sweep: {dim: S, values: [128, 256, 512]}                       # a list, served in the order given
      - name: layernorm_gelu
        sweep: {dim: M, range: {start: 128, stop: 4096, step: 128}}    # start, start+step, ... <= stop
      - name: rmsnorm
        sweep: {dim: M, range: {start: 128, stop: 4096, multiply: 2}}  # start, start*2, ... <= stop

The other dims come from the entry's `shapes` or preset as for any workload (the swept dim may be left out
of them; a value given there is replaced). Dims written as products of the swept one (`H*Dh` with `H`
swept) follow it, and so do dims the graph ties to it: the graph's shape rules name a dim that must equal
another by the same name, so it is the same dim. Checked at load time: the dim is one of the graph's, the
values positive integers with at least two distinct ones, at most MAX_POINTS of them, and the size limits
hold at every value (the config loader's size check, which the largest value decides).
"""
from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictInt, model_validator

MAX_POINTS = 256
Positive = Annotated[StrictInt, Field(gt=0, le=2**31 - 1)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class SweepRange(_Strict):
    """start, then adding `step` (or multiplying by `multiply`) while the value is <= stop (stop included
    when reached)."""

    start: Positive
    stop: Positive
    step: Positive | None = None
    multiply: Annotated[StrictInt, Field(ge=2, le=1024)] | None = None

    @model_validator(mode="after")
    def _one_rule(self) -> "SweepRange":
        if (self.step is None) == (self.multiply is None):
            raise ValueError("a range takes one of `step` (start, start+step, ...) or `multiply` "
                             "(start, start*multiply, ...)")
        if self.stop <= self.start:
            raise ValueError(f"stop ({self.stop}) must be greater than start ({self.start}): a sweep needs at "
                             "least two values")
        n = (self.stop - self.start) // self.step + 1 if self.step else None
        if n is not None and n > MAX_POINTS:
            raise ValueError(f"this range has {n} values; a sweep has at most {MAX_POINTS} (raise `step`)")
        if len(self.values()) < 2:
            raise ValueError(f"this range holds only {self.start}: the next value passes stop ({self.stop})")
        return self

    def values(self) -> list[int]:
        out, v = [], self.start
        while v <= self.stop and len(out) <= MAX_POINTS:
            out.append(v)
            v = v + self.step if self.step else v * self.multiply
        return out


class SweepValues(_Strict):
    """A sweep's values: `values` (a list) or `range`."""

    values: Annotated[list[Positive], Field(min_length=2, max_length=MAX_POINTS)] | None = None
    range: SweepRange | None = None

    @model_validator(mode="after")
    def _values(self) -> "SweepValues":
        if (self.values is None) == (self.range is None):
            raise ValueError("a sweep takes one of `values` (a list) or `range` ({start, stop, step} or "
                             "{start, stop, multiply})")
        if self.values is not None and len(set(self.values)) < 2:
            raise ValueError(f"a sweep needs at least two distinct values, got {self.values}")
        return self

    def points(self) -> list[int]:
        """The values in the order they are served (a list as given; a range ascending)."""
        return list(self.values) if self.values is not None else self.range.values()


class SweepConfig(SweepValues):
    """`dim` and its values (`values` or `range`); `presets` gives other values under a preset's name (e.g.
    `presets: {gpu: {range: {start: 128, stop: 4096, multiply: 2}}}`), used when the entry runs at that preset."""

    dim: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
    presets: dict[Annotated[str, Field(max_length=64)], SweepValues] | None = None

    def points_for(self, preset: str | None) -> list[int]:
        if preset is not None and self.presets and preset in self.presets:
            return self.presets[preset].points()
        return self.points()

