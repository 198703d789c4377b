"""The `bakeoff` command line. Thin: each command parses arguments and calls one function.

Exit codes: 0 success; 1 a run or comparison found failures/regressions where a command says so;
2 bad input (config, arguments, unknown run, a results store that does not exist for a command that only
reads one, a --device this host cannot present) with nothing written.
"""
from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any, Callable, Optional

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from bakeoff.harness.cli.backend_table import backend_rows, backends_table, options_table
from bakeoff.harness.cli.common import DB_OPTION, console, err_console, fail, open_store, print_fields
from bakeoff.harness.cli.overhead import elapsed_line, elapsed_s, totals_line
from bakeoff.harness.cli.report_commands import register as register_report_commands
from bakeoff.harness.cli.run_id_file import run_id_writer
from bakeoff.harness.cli.summary import print_summary
from bakeoff.harness.config.schema import BUILTIN_CONFIG_PATH, CASE_DTYPES, DEVICE_HELP, check_device, default_config_text
from bakeoff.harness.config.source import read_config_file
from bakeoff.harness.config.yaml_lines import ConfigError
from bakeoff.harness.measure.environment import environment
from bakeoff.harness.plan.from_config import resolve_device
from bakeoff.harness.run.executors import EXECUTORS, ExecutorError, ExecutorSpec
from bakeoff.harness.supervise.gate_policy import REQUESTABLE as GATE_POLICIES
from bakeoff.harness.supervise.slots import DeviceUnavailable, local_slots
from bakeoff.results.case_order import in_config_order
from bakeoff.results.errors import LeaseLost, StoreError
from bakeoff.workloads.suite import every_workload

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__.split("\n")[0])
WIDE_HELP = "One row per case with every column (spread, compile times, errors), at its natural width"
list_app = typer.Typer(help="List workloads or backends.", no_args_is_help=True)
app.add_typer(list_app, name="list")

register_report_commands(app)  # report, compare, dashboard


def _check_device_option(device: str | None) -> None:
    """--device is validated like a config's `device` field: a typo must not plan a run of skipped cases."""
    if device is not None:
        try:
            check_device(device)
        except ValueError:
            fail(f"--device must be {DEVICE_HELP}, not {device!r}")


def _device_here(device: str) -> str:
    """--device checked and resolved ('auto': what this host has); a device this host cannot present exits 2
    with the check and message of `run --device` (the local executor's slots)."""
    _check_device_option(device)
    dev = resolve_device(device)
    if dev.startswith("cuda"):
        try:
            local_slots(dev, 1)
        except DeviceUnavailable as exc:
            fail(f"--device {device}: {exc}")
    return dev


@app.command()
def run(config: Optional[Path] = typer.Argument(None, help="YAML config; the built-in default when omitted"),
        backend: Optional[list[str]] = typer.Option(None, "--backend", "-b", help="Run only these backends"),
        workload: Optional[list[str]] = typer.Option(None, "--workload", "-w", help="Run only these workloads"),
        device: Optional[str] = typer.Option(None, "--device", help=DEVICE_HELP),
        preset: Optional[str] = typer.Option(None, "--preset", help="Shape preset: smoke, cpu, gpu"),
        resume: Optional[str] = typer.Option(None, "--resume", help="Finish the cases of this run id"),
        jobs: Optional[int] = typer.Option(None, "--jobs", "-j",
                                           help="Parallel workers: N CPU workers, or workers dealt to the GPUs "
                                                "(one per GPU when N = their number); on Ray, tasks in flight"),
        executor: str = typer.Option("local", "--executor", help="local (this host) or ray"),
        ray_address: Optional[str] = typer.Option(None, "--ray-address",
                                                  help="Ray cluster to join (default: start a local instance)"),
        wide: bool = typer.Option(False, "--wide", help=WIDE_HELP),
        gate: Optional[str] = typer.Option(None, "--gate", help="Timing gate policy, overriding the config's "
                                           "timing.gate: auto (the default: beside_compiles on a GPU with the "
                                           "CUPTI pass, else exclusive), exclusive (nothing else runs on the "
                                           "device while a case times), beside_compiles (other cases' device "
                                           "work waits, their host-side compiles do not) or timers_only (only "
                                           "timing phases are serialized)"),
        run_id_file: Optional[Path] = typer.Option(None, "--run-id-file",
                                                   help="Write the run's id to this file once the run is in the "
                                                        "store (for the CI steps after it: compare, report)"),
        db: Optional[str] = DB_OPTION) -> None:
    """Run a benchmark config and print its summary table.

    The config is validated and planned, and the executor made, before the store is opened: a bad config
    or argument exits 2 with nothing written. With a config file, --backend names labels of its `backends`;
    with the built-in default, any registered backend (one the default lacks is added)."""
    if gate is not None and gate not in GATE_POLICIES:
        fail(f"--gate must be one of {', '.join(GATE_POLICIES)}, not {gate!r}")
    if resume and (config or backend or workload or device or preset or gate):
        fail("--resume takes only --db, --jobs, --executor, --ray-address, --run-id-file and --wide: the run "
             "keeps the config and filters it started with")
    if executor not in EXECUTORS:
        fail(f"--executor must be one of {', '.join(EXECUTORS)}, not {executor!r}")
    if ray_address and executor != "ray":
        fail("--ray-address goes with --executor ray")
    if jobs is not None and jobs < 1:
        fail(f"--jobs must be at least 1, not {jobs}")
    _check_device_option(device)
    filters = (tuple(backend) if backend else None, tuple(workload) if workload else None, device, preset, gate)
    recorded = _Recorded(run_id_writer(run_id_file) if run_id_file is not None else None)
    store, run_id = _start_or_resume(config, filters, resume, ExecutorSpec(executor, jobs, ray_address), db,
                                     recorded)
    run = store.run(run_id)
    records = in_config_order(store.records(run_id), run.get("config_text"))
    print_summary(console, records, title=f"run {run_id}", wide=wide)
    _print_totals(run, records, recorded.at)
    bad = [r for r in records if r["status"] not in ("ok", "skipped")]
    print_fields([f"{len(records)} cases: {sum(r['status'] == 'ok' for r in records)} ok",
                  f"{sum(r['status'] == 'skipped' for r in records)} skipped", f"{len(bad)} failed",
                  f"store {store.url}", f"run {run_id}"])


class _Recorded:
    """`on_created` of `bakeoff run`: notes when the run was recorded (a resume: counted), for the elapsed time of
    a resume, then calls `then` (the --run-id-file writer)."""

    def __init__(self, then: Callable[[str], None] | None) -> None:
        self.then = then
        self.at: dt.datetime | None = None

    def __call__(self, run_id: str) -> None:
        self.at = dt.datetime.now(dt.timezone.utc)
        if self.then is not None:
            self.then(run_id)


def _start_or_resume(config: Path | None, filters: tuple, resume: str | None, spec: ExecutorSpec,
                     db: str | None, on_created: Callable[[str], None] | None = None) -> tuple[Any, str]:
    """The run started from `config` narrowed by `filters` (or the run `resume` finished): its store and id.
    Everything wrong with the config is found before the store is opened. `on_created(run_id)` as the run is
    recorded (a resumed run: once the resume holds it and is allowed, or finds it complete). SIGTERM, from
    the start (planning, Ray starting), ends the command as Ctrl-C does: exit 130, saying on stderr, before a
    case ran, that nothing of the run (or of its resume) was written yet, or which run stays in the store and
    the command that finishes it."""
    # The orchestrator and the run's lease bring SQLAlchemy (and the store): loaded when a run starts only.
    from bakeoff.harness.run.lease_heartbeat import LeaseError, stale_after_s
    from bakeoff.harness.run.orchestrator import (Filters, NoCaseRan, NotRecorded, before_recording, executor_for,
                                                  plan_run, resume_run, sigterm_interrupts, start_run)

    try:
        with sigterm_interrupts():
            stale_after_s()  # BAKEOFF_LEASE_STALE_S, checked before anything is written
            if resume:
                with before_recording():
                    store = open_store(db)
                return store, resume_run(store, resume, console, spec, on_created)
            with before_recording():
                if config is not None:
                    text, path = read_config_file(config), str(config)
                else:
                    text, path = default_config_text(), BUILTIN_CONFIG_PATH
                planned = plan_run(text, path, Filters(*filters))  # everything wrong with the config is found here
                runner = executor_for(planned, spec)
                try:
                    store = open_store(db, create=True)
                except BaseException:
                    runner.close()
                    raise
            return store, start_run(store, planned, console, runner, spec, on_created)
    except (ConfigError, ExecutorError, StoreError, LeaseError, LeaseLost) as exc:
        # bad config, impossible executor, unknown run, a run held by another orchestrator (or taken over)
        fail(str(exc))
    except (NotRecorded, NoCaseRan) as exc:
        left = (exc.run_id, exc.resume) if isinstance(exc, NoCaseRan) else None
        err_console.print(_interrupted_before(resume, left), markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(130)
    except KeyboardInterrupt:  # run_cases said how to resume the run (CasesInterrupted), or an instant between steps
        raise typer.Exit(130)


def _interrupted_before(resume: str | None, left: tuple[str, str] | None) -> str:
    """What `bakeoff run` (`--resume RESUME`) says on stderr when Ctrl-C or SIGTERM stops it before a case ran:
    that nothing of it was written, or (`left`: the run's id and the command that finishes it) that the run
    stays in the store and how to finish it."""
    if left is None:
        what = (f"the resume of run {resume} started: the run is as it was" if resume
                else "the run was recorded: nothing of it was written")
    else:
        run_id, command = left
        what = (f"the resume of run {run_id} ran a case: the run" if resume else f"run {run_id} ran a case: it")
        what += f" stays in the store; finish it with: {command}"
    return f"interrupted before {what}"


@list_app.command("workloads")
def list_workloads() -> None:
    """The built-in workloads (the default suite, then the numerics suite), their category and presets."""
    t = Table("workload", "category", "what", "presets")
    for w in every_workload().values():
        t.add_row(*(Text(x) for x in (w.name, w.category, w.description, "; ".join(
            f"{p}: " + ",".join(f"{k}={v}" for k, v in dims.items()) for p, dims in w.presets.items()))))
    console.print(t)


@list_app.command("backends")
def list_backends(options: bool = typer.Option(False, "--options",
                                               help="Also each backend's options: type, default, description")) -> None:
    """Each backend, where it comes from, its version, and whether it is available here (or why not);
    plugins that cannot be used are listed with the reason."""
    console.print(backends_table())
    if options:
        console.print(options_table())


@app.command()
def show(run_id: Optional[str] = typer.Argument(None, help="Run id, or 'latest' (the default)"),
         wide: bool = typer.Option(False, "--wide", help=WIDE_HELP),
         db: Optional[str] = DB_OPTION) -> None:
    """Print a run's summary table."""
    store = open_store(db)
    try:
        run_id = store.latest_run_id() if run_id in (None, "latest") else run_id
        run = store.run(run_id)
    except StoreError as exc:
        fail(str(exc))
    env = run.get("environment") or {}
    print_fields([f"run {run_id} ({run['status']})", f"config {run['config_name']}",
                  f"device {run['device']} ({env.get('gpu_name') or env.get('cpu_model')})",
                  f"fingerprint {run['fingerprint']}", f"harness {run['harness_rev']}"])
    records = in_config_order(store.records(run_id), run.get("config_text"))
    print_summary(console, records, title=f"run {run_id}", wide=wide)
    _print_totals(run, records)


def _print_totals(run: dict, records: list[dict], resumed_at: dt.datetime | None = None) -> None:
    """The run's wall time and its shares compiling, timing and overhead (cli/overhead.py). Of a resumed run,
    with `resumed_at` (this command's resume started then), those of that resume's cases over its elapsed time;
    without it, the cases of every session and no elapsed time."""
    elapsed = elapsed_s(run, resumed_at)
    resumed = bool(run.get("resumes")) and elapsed is not None
    if resumed:
        records = [r for r in records if r.get("attempt") == run["resumes"] + 1]
    totals = totals_line(records, elapsed)
    for line in (f"this resume: {totals}" if resumed and totals else totals, elapsed_line(records, elapsed)):
        if line:
            console.print(line, highlight=False, markup=False)


@app.command()
def export(run_id: str = typer.Argument(..., help="Run id, or 'latest'"),
           format: str = typer.Option("json", "--format", "-f", help="csv, json or parquet"),
           output: Optional[Path] = typer.Option(None, "-o", "--output",
                                                 help="File (csv and json go to stdout without; parquet needs one)"),
           db: Optional[str] = DB_OPTION) -> None:
    """Write a run's records as csv, json or parquet: to stdout, or to FILE with -o (then what was written is
    said on stderr). One row per case, a column per record field (the same names in all three formats); in csv
    and parquet, lists and mappings (samples, kernel times) are JSON text; parquet carries each column's
    description, units included, in its field metadata."""
    from bakeoff.results.export import export_records  # pandas: loaded by this command only

    if format not in ("csv", "json", "parquet"):
        fail(f"--format must be csv, json or parquet, not {format!r}")
    if format == "parquet" and output is None:
        fail("--format parquet is binary: it needs -o FILE")
    store = open_store(db)
    try:
        run_id = store.latest_run_id() if run_id == "latest" else run_id
        store.run(run_id)
    except StoreError as exc:
        fail(str(exc))
    records = store.records(run_id)
    try:
        text = export_records(records, format, output)
    except OSError as exc:  # pandas and pyarrow raise theirs without strerror
        fail(f"{output}: cannot write: {exc.strerror or exc}")
    if text is not None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        err_console.print(f"wrote {len(records)} records of run {run_id} to {output} ({format}, "
                          f"{output.stat().st_size:,} bytes)", markup=False, highlight=False)


@app.command()
def doctor(device: str = typer.Option("auto", "--device", help=DEVICE_HELP)) -> None:
    """Print the environment and what each backend needs (plugins that cannot be used, and why)."""
    env = environment(_device_here(device))
    for key, value in env.items():
        console.print(Text.assemble((key, "bold"), ": ", json.dumps(value) if isinstance(value, dict | list)
                                    else str(value)))
    console.print()
    for row in backend_rows():
        text = escape(f"available {row.version or ''}" if row.usable else row.status)
        console.print(f"[bold]{escape(row.name)}[/] ({escape(row.origin)}): "
                      + (f"[green]{text}[/]" if row.usable else f"[yellow]{text}[/]")
                      + (f" [yellow]warning: {escape(row.warning)}[/]" if row.warning else ""))


@app.command()
def calibrate(device: str = typer.Option("auto", "--device", help=DEVICE_HELP),
              dtype: Optional[list[str]] = typer.Option(None, "--dtype",
                                                        help=f"Matmul dtypes: {', '.join(CASE_DTYPES)} (default: all)"),
              db: Optional[str] = DB_OPTION) -> None:
    """Measure and store the device's ceilings (copy GB/s, matmul TFLOP/s per dtype) for its fingerprint."""
    dev = _device_here(device)  # before the store is opened: a device that is not here writes nothing
    for name in dtype or []:
        if name not in CASE_DTYPES:
            fail(f"--dtype must be one of {', '.join(CASE_DTYPES)}, not {name!r}")
    from bakeoff.harness.measure.calibrate import measure_ceilings  # torch: loaded by this command only

    env = environment(dev)
    dtypes = list(dict.fromkeys(dtype)) if dtype else list(CASE_DTYPES)
    store = open_store(db, create=True)
    values = measure_ceilings(dev, dtypes)
    store.add_ceilings(env["fingerprint"], dev, values, env)
    spec = {name.removeprefix("spec_"): value for name, value, _, _ in values if name.startswith("spec_")}
    for name, value, unit, method in values:
        of_spec = f", {100 * value / spec[name]:.0f}% of the spec sheet's" if name in spec else ""
        console.print(Text.assemble(f"{name}: ", (f"{value:.1f}", "bold"), f" {unit}{of_spec}  ({method})"))
    console.print(f"stored for fingerprint {env['fingerprint']} in {store.url}", markup=False)


def main() -> None:  # pragma: no cover - console entry point
    app()


