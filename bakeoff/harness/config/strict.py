"""The base of every config model: strict, frozen, closed."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    # Values keep their YAML type (`yes` or "4" is not coerced to a bool or a number; an int is a float), and
    # every float is finite: `.inf` or `.nan` is never a meaningful time, size or limit.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)
