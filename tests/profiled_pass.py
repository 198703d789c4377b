"""A stand-in for device_time.run_pass's result in tests of the figures (tests only)."""
from __future__ import annotations

from typing import Any, Callable


class FakePass:
    """What figures.run_pass gives: the pass's figures, made only when asked for (after the gate)."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make

    def figures(self) -> Any:
        return self.make()
