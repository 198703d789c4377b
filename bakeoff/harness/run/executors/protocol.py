"""What an executor is (the protocol the orchestrator drives), what the command line asks of one, and its
errors; executors/__init__.py makes one."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

from bakeoff.harness.plan.cases import Case

EXECUTORS = ("local", "ray")


class ExecutorError(ValueError):
    """An executor this host cannot provide (bad --jobs, no such GPU, Ray not installed); the CLI exits 2."""


class DeviceError(ExecutorError):
    """The run's device is not there (no such GPU here, or none in the Ray cluster): the error of whatever
    chose the device, the config's `device` or --device."""


@dataclass(frozen=True)
class ExecutorSpec:
    """What the command line asked for: `kind` (local or ray), `jobs` (parallel workers; None = 1 locally,
    as many as the Ray cluster's resources allow on Ray), `ray_address` (None = a local Ray instance)."""

    kind: str = "local"
    jobs: int | None = None
    ray_address: str | None = None


OnStart = Callable[[Case], None]


class Executor(Protocol):
    """Runs cases and yields (case, record) as each ends, calling `on_start(case)` (possibly from another
    thread) as each starts (locally: its worker starts; on Ray: its task is submitted); `stop` kills
    whatever is in flight; `drain` then returns the results that had ended but were not yet handed out;
    `close` releases what it holds; `environment(device)` is the environment fingerprint of where the cases
    run (this host locally; a node of the cluster on Ray), recorded with the run; `resume_options()` the
    options of `bakeoff run --resume` that resume on the same workers (" --jobs 2", " --executor ray")."""

    def run(self, cases: list[Case], work_dir: Path,
            on_start: OnStart | None = None) -> Iterator[tuple[Case, dict[str, Any]]]: ...

    def stop(self) -> None: ...

    def drain(self) -> list[tuple[Case, dict[str, Any]]]: ...

    def close(self) -> None: ...

    def environment(self, device: str) -> dict[str, Any]: ...

    def resume_options(self) -> str: ...
