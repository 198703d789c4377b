"""Executors: how the cases of a run are spread over workers. The orchestrator alone writes the store.

`local` runs `--jobs N` worker slots on this host (threads, each waiting on one worker subprocess at a
time); `ray` sends each case to a Ray cluster as a task. Both hand results back as they finish, and both
can be stopped (Ctrl-C) with every in-flight worker killed. Ray is imported only when asked for.
"""
from __future__ import annotations

from bakeoff.harness.run.executors.local import LocalExecutor
from bakeoff.harness.run.executors.protocol import (EXECUTORS, DeviceError, Executor, ExecutorError, ExecutorSpec,
                                                    OnStart)
from bakeoff.harness.run.executors.ray_executor import RayExecutor
from bakeoff.harness.supervise.slots import DeviceUnavailable, local_slots

__all__ = ["EXECUTORS", "DeviceError", "Executor", "ExecutorError", "ExecutorSpec", "OnStart", "make_executor"]


def make_executor(spec: ExecutorSpec, device: str) -> Executor:
    """The executor for `spec`, for cases on `device`. Raises ExecutorError for an impossible request."""
    if spec.jobs is not None and spec.jobs < 1:
        raise ExecutorError(f"--jobs must be at least 1, not {spec.jobs}")
    if spec.kind == "local":
        if spec.ray_address:
            raise ExecutorError("--ray-address goes with --executor ray")
        try:
            return LocalExecutor(local_slots(device, spec.jobs or 1))
        except DeviceUnavailable as exc:
            raise DeviceError(str(exc)) from None
        except ValueError as exc:
            raise ExecutorError(str(exc)) from None
    if spec.kind == "ray":
        return RayExecutor(device, spec.jobs, spec.ray_address)
    raise ExecutorError(f"unknown executor {spec.kind!r}; executors: {', '.join(EXECUTORS)}")
