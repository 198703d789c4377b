"""The old name of backends/shape_sweep.py, kept for the imports that still use it (tritongen/sweep.py)."""
from bakeoff.backends.shape_sweep import PerShapeServer, SweepServer, SweepSpec

__all__ = ["PerShapeServer", "SweepServer", "SweepSpec"]
