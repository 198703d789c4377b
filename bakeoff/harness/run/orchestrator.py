"""The orchestrator: plan a config, run its cases through an executor, write each record as its case ends.

It is the only writer of the store. Cases run on `--jobs N` local worker slots or on a Ray cluster
(harness/executors); each record is committed in its own transaction and its artifacts are moved into
place only after that (harness/staging.py). Ctrl-C stops every worker, keeps every finished record, marks
the run interrupted and says how to resume; `--resume RUN_ID` runs only the cases without a record.
"""
from __future__ import annotations

import errno
import fcntl
import os
import signal
import socket
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

from rich.console import Console
from rich.markup import escape

from bakeoff.results.store import Store

from bakeoff.harness.config.backend_options import check_backends
from bakeoff.harness.config.schema import BUILTIN_CONFIG_PATH, Config, LocatedYaml, parse_config, resolve_workloads
from bakeoff.harness.run.case_process import case_fields
from bakeoff.harness.run.executors import DeviceError, Executor, ExecutorError, ExecutorSpec, make_executor
from bakeoff.harness.plan.cases import Case, plan_cases, resolve_device, resolve_preset
from bakeoff.harness.run.progress import RunProgress
from bakeoff.harness.run.staging import discard, publish, recover
from bakeoff.harness.config.yaml_lines import ConfigError, load_yaml


@dataclass(frozen=True)
class Filters:
    """Command-line narrowing of a config (None = keep all)."""

    backends: tuple[str, ...] | None = None
    workloads: tuple[str, ...] | None = None
    device: str | None = None
    preset: str | None = None
    gate: str | None = None  # the timing gate policy (timing.gate), overriding the config's


class RunBusyError(RuntimeError):
    """The run is still held by a live orchestrator (its lease is taken); the CLI exits 2."""


@dataclass(frozen=True)
class PlannedRun:
    """A validated config and its cases, before anything is written."""

    cfg: Config
    config_text: str
    config_path: str
    filters: Filters
    device: str
    cases: list[Case]


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
            from bakeoff.backends import known, names

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


def _complete(case: Case, result: dict[str, Any], ceilings: dict[str, float]) -> dict[str, Any]:
    record = {**case_fields(case), **result}
    record.setdefault("status", "crash")
    ceiling = _ceiling_for(case, ceilings)
    if ceiling and (record.get("headline_ms") or record.get("latency_ms_median")):
        from bakeoff.harness.measure.ceiling_share import ceiling_fields

        record.update(ceiling_fields(record, ceiling, ceilings))
    return record


def _ceiling_for(case: Case, ceilings: dict[str, float]) -> tuple[str, float] | None:
    """The ceiling that bounds this case: matmul TFLOP/s for compute-bound graphs, copy GB/s otherwise.

    With both ceilings measured, the measured ridge point decides; with one missing, the cost model's
    (workloads.costs.bound_kind) does, and a case bound by the missing ceiling gets none (None): a
    compute-bound case is never measured against copy bandwidth, nor a memory-bound one against matmul."""
    intensity = case.flops / max(case.bytes_moved, 1)
    key = f"matmul_tflops_{case.dtype}"
    if key in ceilings and "copy_gbps" in ceilings:
        ridge = ceilings[key] * 1e12 / (ceilings["copy_gbps"] * 1e9)
        return (key, ceilings[key]) if intensity > ridge else ("copy_gbps", ceilings["copy_gbps"])
    if key not in ceilings and "copy_gbps" not in ceilings:
        return None
    from bakeoff.workloads.costs import bound_kind

    wanted = key if bound_kind(case.bound_graph(), grad=getattr(case, "grad", False)) == "compute" else "copy_gbps"
    return (wanted, ceilings[wanted]) if wanted in ceilings else None


def run_cases(store: Store, run_id: str, cases: list[Case], work_dir: Path, console: Console,
              ceilings: dict[str, float], executor: Executor, attempt: int = 1,
              on_record: Callable[[dict], None] | None = None) -> str:
    """Run the cases of `run_id` that have no record yet, committing each record as its case ends.

    `attempt` is stored with each record (1 for a run's first session, k for its (k-1)-th resume).
    Returns the run's final status; on Ctrl-C marks it interrupted and re-raises KeyboardInterrupt.
    """
    done = store.done_case_ids(run_id)
    recover(work_dir, cases, done)
    todo = [c for c in cases if c.case_id not in done]

    def started(case: Case) -> None:  # called by the executor (from its slot threads) as a case starts
        progress.started(case)

    def write(case: Case, result: dict[str, Any]) -> None:
        record = {**_complete(case, result, ceilings), "attempt": attempt}
        if store.add_record(run_id, record):  # committed: now its artifacts may appear
            publish(work_dir, case)
        else:
            discard(work_dir, case)  # another orchestrator recorded this case first
        if on_record:
            on_record(record)
        progress.finished(case, record)

    with RunProgress(console, todo) as progress:  # a bar on a terminal, a line per case elsewhere
        try:
            for case in todo:
                if case.skip_reason:
                    write(case, {"status": "skipped", "reason": case.skip_reason})
            for case, result in executor.run([c for c in todo if not c.skip_reason], work_dir, on_start=started):
                write(case, result)
        except KeyboardInterrupt:
            with _sigint_ignored():  # a second Ctrl-C must not cut the cleanup short
                executor.stop()
                for case, result in executor.drain():  # ended before the interrupt: keep them
                    write(case, result)
                recover(work_dir, cases, store.done_case_ids(run_id))  # drop what killed workers staged
                store.finish_run(run_id, "interrupted")
                executor.close()
            console.print(f"[yellow]interrupted[/]: {store.count_records(run_id)} of {len(cases)} cases kept. "
                          f"Resume with: bakeoff run --resume {run_id}" + escape(_db_hint(store)), highlight=False)
            raise
        except Exception:  # the store went away, a harness bug: stop the workers; the run stays resumable
            executor.stop()
            executor.close()
            raise
    executor.close()
    store.finish_run(run_id, "complete")
    return "complete"


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _db_hint(store: Store) -> str:
    from bakeoff.results.store import default_url

    return "" if store.url == default_url() else f" --db {store.safe_url}"


def plan_run(config_text: str, config_path: str, filters: Filters) -> PlannedRun:
    """Validate and plan; touches nothing. Raises ConfigError for a bad config or filter."""
    cfg, where = parse_config(config_text, config_path)
    device, cases = build_cases(cfg, where, filters, extend_backends=config_path == BUILTIN_CONFIG_PATH)
    return PlannedRun(cfg, config_text, config_path, filters, device, cases)


def executor_for(planned: PlannedRun, spec: ExecutorSpec) -> Executor:
    """`make_executor` for a planned run. A device that is not there is the error of what chose it: the
    config's `device` (its file and line) unless --device did."""
    try:
        return make_executor(spec, planned.device)
    except DeviceError as exc:
        if planned.filters.device is not None:
            raise DeviceError(f"--device {planned.filters.device}: {exc}") from None
        raise load_yaml(planned.config_text, planned.config_path).error(("device",), str(exc)) from None


def start_run(store: Store, planned: PlannedRun, console: Console, executor: Executor,
              spec: ExecutorSpec = ExecutorSpec()) -> str:
    """Record the run (planned by `plan_run`, its executor made by `make_executor`), hold its lease, run
    every case; returns the run id."""
    device, cases = planned.device, planned.cases
    try:
        env = executor.environment(device)  # where the cases run: on Ray, a node of the cluster
        run_id = store.create_run(config_name=planned.cfg.name, config_path=planned.config_path,
                                  config_text=planned.config_text, device=device,
                                  environment=_with_filters(env, planned.filters), n_cases=len(cases))
    except BaseException:
        executor.close()
        raise
    console.print(f"run [bold]{run_id}[/]: {len(cases)} cases on {device} "
                  f"({escape(str(env.get('gpu_name') or env.get('cpu_model')))}), {_describe(spec)}, "
                  f"store {escape(store.safe_url)}", highlight=False)
    work_dir = _work_dir(run_id)
    with run_lease(run_id):
        run_cases(store, run_id, cases, work_dir, console, store.latest_ceilings(env), executor)
    return run_id


def _lease_path(run_id: str) -> Path:
    """The run's lease file, beside its artifacts folder."""
    return (Path("results") / "artifacts" / f"{run_id}.lock").resolve()


@contextmanager
def run_lease(run_id: str) -> Iterator[None]:
    """Hold the run's lease (an exclusive flock on its lock file) while its orchestrator lives; the kernel
    drops it when the process ends, however it ends. Raises RunBusyError when another process holds it."""
    path = _lease_path(run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by workers (PEP 446)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            raise RunBusyError(f"run {run_id} is still being run ({holder}); wait for it to end or stop it "
                               f"before resuming") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def _work_dir(run_id: str) -> Path:
    """The run's artifacts folder, absolute (Ray workers and threads must not depend on the cwd)."""
    work_dir = (Path("results") / "artifacts" / run_id).resolve()
    work_dir.mkdir(parents=True, exist_ok=True)
    return work_dir


def _describe(spec: ExecutorSpec) -> str:
    if spec.kind == "ray":
        return f"on Ray ({spec.ray_address or 'local instance'}" + (f", {spec.jobs} at a time)" if spec.jobs else ")")
    return f"{spec.jobs or 1} worker" + ("s" if (spec.jobs or 1) > 1 else "")


def _with_filters(env: dict[str, Any], filters: Filters) -> dict[str, Any]:
    return {**env, "filters": {k: v for k, v in filters.__dict__.items() if v}}


def resumed_cases(run: dict[str, Any]) -> tuple[str, list[Case]]:
    """The cases of a stored run, planned with its config and filters on the device it was resolved to when
    it started (and so its preset and default dtypes), not on whatever this host would pick."""
    saved = (run.get("environment") or {}).get("filters", {})
    filters = Filters(**{k: tuple(v) if isinstance(v, list) else v for k, v in saved.items()})
    config_path = run["config_path"] or "<stored config>"
    cfg, where = parse_config(run["config_text"], config_path)
    filters = replace(filters, device=run["device"])  # build_cases resolves the preset for that device
    return build_cases(cfg, where, filters, extend_backends=config_path == BUILTIN_CONFIG_PATH)


def _check_host_device(run_id: str, device: str, spec: ExecutorSpec) -> None:
    """Refuse to resume a CUDA run locally on a host that cannot present its device."""
    if spec.kind != "local" or not device.startswith("cuda"):
        return
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    index = int(device.split(":")[1]) if ":" in device else 0
    if index >= count:
        raise ExecutorError(f"run {run_id} ran on {device}, which this host cannot present "
                            f"({count} CUDA device(s) here): resume it on a host that has that device")


def resume_run(store: Store, run_id: str, console: Console, spec: ExecutorSpec = ExecutorSpec()) -> str:
    """Finish the cases of `run_id` that have no record, with the config, filters, device and preset the run
    started with. Raises RunBusyError while another orchestrator still runs it."""
    run = store.run(run_id)
    device, cases = resumed_cases(run)
    _check_host_device(run_id, device, spec)
    with run_lease(run_id):
        try:
            executor = make_executor(spec, device)
        except ExecutorError as exc:
            raise ExecutorError(f"run {run_id} ran on {device}; cannot resume it here: {exc}") from None
        try:
            console.print(f"resuming [bold]{run_id}[/]: {len(cases) - len(store.done_case_ids(run_id))} of "
                          f"{len(cases)} cases left on {device}, {_describe(spec)}", highlight=False)
            attempt = store.start_resume(run_id)
        except BaseException:
            executor.close()
            raise
        ceilings = store.latest_ceilings(run.get("environment") or {})
        run_cases(store, run_id, cases, _work_dir(run_id), console, ceilings, executor, attempt=attempt)
    return run_id
