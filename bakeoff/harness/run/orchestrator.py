"""The orchestrator: plan a config, run its cases through an executor, write each record as its case ends.

It is the only writer of the store. Cases run on `--jobs N` local worker slots or on a Ray cluster
(harness/run/executors); each record is committed in its own transaction and its artifacts are moved into
place only after that (harness/supervise/staging.py). Ctrl-C, or SIGTERM (a CI job's timeout or cancel), stops every
worker, keeps every finished record, marks the run interrupted and says how to resume; `--resume RUN_ID` runs only
the cases without a record, in the environment the run started in (harness/run/resume_check.py).
A run is held by one orchestrator at a time through its lease in the store (harness/run/lease_heartbeat.py), wherever
the orchestrators start; each record is a CaseRecord (results/record.py), built from the case and what its
workers returned by run/assemble.py. Planning (config to cases) is plan/from_config.py's.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

from rich.console import Console
from rich.markup import escape

from bakeoff.results.deferred_interrupt import sigint_deferred
from bakeoff.results.leases import LeaseLost
from bakeoff.results.record import CaseRecord
from bakeoff.results.store import Store, default_url

from bakeoff.harness.config.schema import BUILTIN_CONFIG_PATH, Config, parse_config
from bakeoff.harness.config.yaml_lines import load_yaml
from bakeoff.harness.plan.cases import Case
from bakeoff.harness.plan.from_config import Filters, build_cases
from bakeoff.harness.run.assemble import build_record
from bakeoff.harness.run.executors import DeviceError, Executor, ExecutorError, ExecutorSpec, make_executor
from bakeoff.harness.run.lease_heartbeat import LeaseError, RunBusyError, RunLease  # noqa: F401  (the CLI's errors)
from bakeoff.harness.run.progress import RunProgress
from bakeoff.harness.run.resume_check import check_same_environment
from bakeoff.harness.supervise.leftovers import clean_run_folders, clean_temporary
from bakeoff.harness.supervise.staging import discard, drop_empty_staging, publish, recover

__all__ = ["CasesInterrupted", "Filters", "LeaseError", "NoCaseRan", "NotRecorded", "RunBusyError", "before_recording",
           "executor_for", "plan_run", "resume_run", "sigterm_interrupts", "start_run"]


ARTIFACTS_ROOT = Path("results") / "artifacts"  # relative to the working folder


@dataclass(frozen=True)
class PlannedRun:
    """A validated config and its cases, before anything is written."""

    cfg: Config
    config_text: str
    config_path: str
    filters: Filters
    device: str
    cases: list[Case]


def run_cases(store: Store, run_id: str, cases: list[Case], work_dir: Path, console: Console,
              ceilings: dict[str, float], executor: Executor, attempt: int = 1,
              on_record: Callable[[CaseRecord], None] | None = None, lease: RunLease | None = None) -> str:
    """Run the cases of `run_id` that have no record yet, committing each record as its case ends.

    `attempt` is stored with each record (1 for a run's first session, k for its (k-1)-th resume). With
    `lease`, every write checks it; once it is lost (LeaseLost) the workers are stopped and nothing more is
    written. Returns the run's final status; on Ctrl-C or SIGTERM marks it interrupted and raises CasesInterrupted."""
    token = lease.token if lease is not None else None
    done = store.done_case_ids(run_id)
    recover(work_dir, cases, done)
    todo = [c for c in cases if c.case_id not in done]

    def started(case: Case) -> None:  # called by the executor (from its slot threads) as a case starts
        progress.started(case)

    def write(case: Case, result: dict[str, Any]) -> None:
        with sigint_deferred():  # recorded, published, reported whole (not cut inside pydantic's serializer)
            record = build_record(case, {**result, "attempt": attempt}, ceilings)
            if lease is not None:
                lease.check()
            if store.add_record(run_id, record, lease=token):  # committed: now its artifacts may appear
                publish(work_dir, case)
            else:
                discard(work_dir, case)  # another orchestrator recorded this case first
            if on_record:
                on_record(record)
            progress.finished(case, record.flat())

    with sigterm_interrupts(), RunProgress(console, todo) as progress:  # a bar on a terminal, else lines
        try:
            for case in (c for c in todo if c.skip_reason):
                write(case, {"status": "skipped", "reason": case.skip_reason})
            for case, result in executor.run([c for c in todo if not c.skip_reason], work_dir, on_start=started):
                write(case, result)
        except KeyboardInterrupt:  # Ctrl-C, SIGTERM, or the lease's heartbeat found the lease lost
            with _signals_ignored():  # a second Ctrl-C or SIGTERM must not cut the cleanup short
                executor.stop()
                try:
                    if lease is not None:
                        lease.check()  # lost: the new holder owns the run now; write and delete nothing
                    for case, result in executor.drain():  # ended before the interrupt: keep them
                        write(case, result)
                    recover(work_dir, cases, store.done_case_ids(run_id))  # drop what killed workers staged
                    store.finish_run(run_id, "interrupted", lease=token)
                finally:
                    executor.close()
            console.print(f"[yellow]interrupted[/]: {store.count_records(run_id)} of {len(cases)} cases kept. "
                          + escape("Resume with: " + _resume_command(store, run_id, executor)), highlight=False)
            raise CasesInterrupted from None
        except Exception as exc:  # the lease was lost, the store went away, a harness bug: stop the workers
            if lease is not None and isinstance(exc, LeaseLost):
                lease.mark_lost(str(exc))  # the heartbeat need not interrupt this cleanup
            executor.stop()
            executor.close()
            raise
    executor.close()
    drop_empty_staging(work_dir)
    store.finish_run(run_id, "complete", lease=token)
    return "complete"


@contextmanager
def _signals_ignored() -> Iterator[None]:
    previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _interrupt(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM in the block raises KeyboardInterrupt, so that a run stopped by a CI job's timeout or cancel (or
    `kill`) is interrupted as by Ctrl-C; only the main thread can set a handler (elsewhere: as is). run_cases
    enters it for whoever calls it; `bakeoff run` enters it too, before planning, and the inner block nests
    (each puts back the handler it found)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class NotRecorded(KeyboardInterrupt):
    """Ctrl-C or SIGTERM before the run (or its resume) was written to the store: nothing of it was."""


@contextmanager
def before_recording() -> Iterator[None]:
    """A Ctrl-C or SIGTERM in the block, which must write nothing of the run, comes out as NotRecorded."""
    try:
        yield
    except NotRecorded:
        raise
    except KeyboardInterrupt:
        raise NotRecorded from None


class CasesInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM while run_cases ran the cases: it marked the run interrupted and said how to resume it."""


class NoCaseRan(KeyboardInterrupt):
    """Ctrl-C or SIGTERM once the run (or its resume) was recorded, before run_cases ran a case: the run stays in
    the store as it is; `resume` is the command that finishes it."""

    def __init__(self, run_id: str, resume: str) -> None:
        super().__init__(run_id, resume)
        self.run_id, self.resume = run_id, resume


@contextmanager
def _until_cases(store: Store, executor: Executor, run_id: Callable[[], str | None]) -> Iterator[None]:
    """A Ctrl-C or SIGTERM in the block, once `run_id()` names the recorded run, comes out as NoCaseRan; one
    before that, and run_cases's own (CasesInterrupted), as they are."""
    try:
        yield
    except (NotRecorded, CasesInterrupted):
        raise
    except KeyboardInterrupt:
        recorded = run_id()
        if recorded is None:
            raise
        raise NoCaseRan(recorded, _resume_command(store, recorded, executor)) from None


def _resume_command(store: Store, run_id: str, executor: Executor) -> str:
    """The command that resumes `run_id` on the same kind of workers, in the same store."""
    db = "" if store.url == default_url() else f" --db {store.safe_url}"
    return f"bakeoff run --resume {run_id}{executor.resume_options()}{db}"


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
              spec: ExecutorSpec = ExecutorSpec(), on_created: Callable[[str], None] | None = None) -> str:
    """Record the run (planned by `plan_run`, its executor made by `make_executor`) with its lease held by
    this process from the start, run every case; returns the run id. `on_created(run_id)` is called once the
    run is in the store, before its first case (so a run cut short still named itself). Ctrl-C or SIGTERM
    comes out as NotRecorded before the run is written, as NoCaseRan after, until run_cases takes over."""
    device, cases = planned.device, planned.cases
    run_id: str | None = None
    with _until_cases(store, executor, lambda: run_id):  # reads run_id as an interrupt comes out
        try:
            with before_recording():
                lease = RunLease(store)
                env = executor.environment(device)  # where the cases run: on Ray, a node of the cluster
            with sigint_deferred():  # an interrupt during the write comes out after it, the run's id known
                run_id = store.create_run(config_name=planned.cfg.name, config_path=planned.config_path,
                                          config_text=planned.config_text, device=device,
                                          environment=_with_filters(env, planned.filters), n_cases=len(cases),
                                          lease=lease.claim)
            if on_created is not None:
                on_created(run_id)
        except BaseException:
            executor.close()
            raise
        console.print(f"run [bold]{run_id}[/]: {len(cases)} cases on {device} "
                      f"({escape(str(env.get('gpu_name') or env.get('cpu_model')))}), {_describe(spec)}, "
                      f"store {escape(store.safe_url)}", highlight=False)
        with lease.held(run_id, acquire=False):
            work_dir = _work_dir(run_id)
            clean_leftovers(console)
            run_cases(store, run_id, cases, work_dir, console, store.latest_ceilings(env), executor, lease=lease)
    return run_id


def clean_leftovers(console: Console) -> None:
    """Delete the case folders that killed bakeoff processes on this machine left behind
    (harness/supervise/leftovers.py): in the temporary folder, and cache folders under this working folder's runs."""
    removed = clean_temporary() + clean_run_folders(ARTIFACTS_ROOT.resolve())
    if removed:
        names = ", ".join(str(p) for p in removed[:3]) + (f" and {len(removed) - 3} more" if len(removed) > 3 else "")
        console.print(f"removed {len(removed)} folder(s) left by killed bakeoff processes: {names}",
                      style="dim", highlight=False)


def _work_dir(run_id: str) -> Path:
    """The run's artifacts folder, absolute (Ray workers and threads must not depend on the cwd)."""
    work_dir = (ARTIFACTS_ROOT / run_id).resolve()
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


def _resume_executor(run: dict[str, Any], device: str, spec: ExecutorSpec) -> Executor:
    """The executor that resumes `run` on `device`, which must be here and in the run's own environment."""
    run_id = run["run_id"]
    _check_host_device(run_id, device, spec)
    try:
        executor = make_executor(spec, device)
    except ExecutorError as exc:
        raise ExecutorError(f"run {run_id} ran on {device}; cannot resume it here: {exc}") from None
    try:
        check_same_environment(run, executor.environment(device))
    except BaseException:
        executor.close()
        raise
    return executor


def resume_run(store: Store, run_id: str, console: Console, spec: ExecutorSpec = ExecutorSpec(),
               on_resumed: Callable[[str], None] | None = None) -> str:
    """Finish the cases of `run_id` that have no record, with the config, filters, device and preset the run
    started with. Raises RunBusyError while another orchestrator, from any folder or host, holds the run.
    A complete run is left as it is. `on_resumed(run_id)` once the resume is allowed and counted (or the run
    found complete): not for a resume that is refused. Ctrl-C or SIGTERM comes out as NotRecorded before the
    resume is under way, as NoCaseRan after, until run_cases takes over."""
    with before_recording():
        run = store.run(run_id)
    if run["status"] == "complete":
        console.print(f"run {run_id} is complete: nothing to resume", highlight=False)
        if on_resumed is not None:
            on_resumed(run_id)
        return run_id
    lease = RunLease(store)
    with lease.held(run_id):  # first: a run held elsewhere is refused before anything else is done
        with before_recording():  # until start_resume only the lease is written, given back as `held` ends
            if lease.took_over:
                console.print(f"took over the lease of run {run_id} from {lease.took_over}", highlight=False)
            device, cases = resumed_cases(run)
            executor = _resume_executor(run, device, spec)
        with _until_cases(store, executor, lambda: run_id):
            try:
                console.print(f"resuming [bold]{run_id}[/]: {len(cases) - len(store.done_case_ids(run_id))} of "
                              f"{len(cases)} cases left on {device}, {_describe(spec)}", highlight=False)
                attempt = store.start_resume(run_id, lease=lease.token)
                if on_resumed is not None:
                    on_resumed(run_id)
            except BaseException:
                executor.close()
                raise
            ceilings = store.latest_ceilings(run.get("environment") or {})
            clean_leftovers(console)
            run_cases(store, run_id, cases, _work_dir(run_id), console, ceilings, executor, attempt=attempt,
                      lease=lease)
    return run_id
