"""The old name of backends/sweep_server.py, kept for the modules that still import it by that name
(tritongen/sweep.py, harness/plan/cases.py, the harness's worker): import from sweep_server instead."""
from bakeoff.backends.sweep_server import PerShapeServer, SweepServer, SweepSpec

__all__ = ["PerShapeServer", "SweepServer", "SweepSpec"]
