"""The `report`, `compare` and `dashboard` commands. They read the results store only; nothing is re-run.
`register(app)` adds them to the main typer app (harness/cli/app.py)."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from bakeoff.harness.cli.common import DB_OPTION, console, err_console, fail, open_store
from bakeoff.results.errors import StoreError
from bakeoff.results.hardware import hardware_id


class NoPreviousRun(StoreError):
    """'previous' names no run: the candidate is the first complete run of its config on its hardware."""


def previous_run(store, run_id: str) -> dict | None:
    """The run to compare `run_id` with: the newest run that started before it, finished with status
    'complete' (not interrupted, not still running), has the same config name and runs on the same hardware
    (results.hardware.hardware_id: GPU/CPU model, not software versions, so that a driver or torch update
    is compared across, and shows up as an environment change). None when there is none."""
    runs = store.runs()
    ids = [r["run_id"] for r in runs]
    if run_id not in ids:
        store.run(run_id)  # raises StoreError: no such run
    cand = runs[ids.index(run_id)]
    hw = hardware_id(cand.get("environment") or {})
    for r in runs[ids.index(run_id) + 1:]:  # newest first: the ones that started before the candidate
        if (r.get("status") == "complete" and r.get("config_name") == cand.get("config_name")
                and hardware_id(r.get("environment") or {}) == hw):
            return r
    return None


def resolve_run(store, ref: str, relative_to: str | None = None) -> str:
    """A run id from `ref`: a run id; 'latest', the newest run (whatever its status); or 'previous', the
    previous_run() of `relative_to` (default: of the newest run). Raises StoreError."""
    if ref == "latest":
        return store.latest_run_id()
    if ref == "previous":
        anchor = relative_to or store.latest_run_id()
        found = previous_run(store, anchor)
        if found is None:
            run = store.run(anchor)
            raise NoPreviousRun(f"'previous': no complete run of config {run.get('config_name')!r} on the same "
                             f"hardware started before run {anchor} in {store.url}")
        return found["run_id"]
    store.run(ref)
    return ref


def _resolve(store, run_id: str, relative_to: str | None = None) -> str:
    """resolve_run(), exiting with code 2 and the reason when the reference names no run."""
    try:
        return resolve_run(store, run_id, relative_to)
    except StoreError as exc:
        fail(str(exc))
        raise  # unreachable: _fail exits


def report(run_ids: Optional[list[str]] = typer.Argument(None, help="Run ids, or latest/previous (default latest; "
                                                                     "previous = the newest complete run before the "
                                                                     "latest with its config and hardware)"),
           output: Path = typer.Option(Path("report.html"), "-o", "--output", help="HTML file to write"),
           cdn: bool = typer.Option(False, "--cdn", help="Load plotly.js from its CDN (small file, needs network)"),
           weights: Optional[str] = typer.Option(None, "--weights", help="e.g. latency=1,compile=0.2,error=0.5"),
           weights_file: Optional[Path] = typer.Option(None, "--weights-file",
                                                       help="YAML: {latency: .., compile: .., error: ..} or "
                                                            "report: {weights: {...}}"),
           db: Optional[str] = DB_OPTION) -> None:
    """Write a self-contained HTML report of one or more runs, for choosing a backend."""
    from bakeoff.results.report.report import build_report  # plotly: loaded by this command only
    from bakeoff.results.report.weights import WeightsError, parse_weights

    try:
        w = parse_weights(weights, weights_file)
    except WeightsError as exc:
        fail(str(exc))
    store = open_store(db)
    ids = [_resolve(store, r) for r in (run_ids or ["latest"])]
    text = build_report(store, ids, w, "cdn" if cdn else "inline")
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text)
    except OSError as exc:
        fail(f"{output}: cannot write: {exc.strerror}")
    console.print(f"wrote {output} ({len(text) / 1e6:.1f} MB) for run(s) {', '.join(ids)}", markup=False,
                  highlight=False)


def compare(base: str = typer.Argument(..., help="Base run id, or previous: the newest complete run before the "
                                                 "candidate with the candidate's config name and hardware"),
            candidate: str = typer.Argument(..., help="Candidate run id, or latest (the newest run)"),
            format: str = typer.Option("text", "--format", "-f", help="text, markdown or json"),
            min_latency: float = typer.Option(0.05, "--min-latency-change", help="Relative, 0.05 = 5%"),
            min_warm: float = typer.Option(0.10, "--min-warm-compile-change", help="Relative"),
            min_cold: float = typer.Option(0.15, "--min-cold-compile-change", help="Relative"),
            alpha: float = typer.Option(0.01, "--alpha", help="Mann-Whitney U significance level for latency"),
            error_factor: float = typer.Option(2.0, "--error-factor", help="Error vs fp64 growth that counts"),
            min_compile_s: float = typer.Option(0.5, "--min-compile-seconds",
                                                help="A compile time change must also be this many seconds "
                                                     "(eager's first call is milliseconds of noise)"),
            error_floor: float = typer.Option(1.0, "--error-floor",
                                              help="Errors vs fp64 below this many unit roundoffs of the dtype "
                                                   "count as equal"),
            allow_missing: bool = typer.Option(False, "--allow-missing",
                                               help="Cases of BASE missing from CANDIDATE are not regressions"),
            allow_no_base: bool = typer.Option(False, "--allow-no-base",
                                               help="When BASE is 'previous' and CANDIDATE is the first complete "
                                                    "run of its config on its hardware (a first night), say so "
                                                    "and exit 0 instead of 2"),
            output: Optional[Path] = typer.Option(None, "-o", "--output", help="Also write the output here"),
            db: Optional[str] = DB_OPTION) -> None:
    """Compare two runs case by case; exit code 1 when anything regressed (a case of BASE missing from
    CANDIDATE counts, unless --allow-missing)."""
    from bakeoff.results.report.compare import Thresholds, compare_runs  # pandas: by this command only
    from bakeoff.results.report.compare_format import FORMATS
    from bakeoff.results.report.data import load_run

    if format not in FORMATS:
        fail(f"--format must be one of {', '.join(FORMATS)}, not {format!r}")
    if (min(min_latency, min_warm, min_cold, min_compile_s, error_floor) < 0 or not 0 < alpha < 1
            or error_factor < 1):
        fail("minimum changes and floors must be >= 0, --alpha in (0, 1), --error-factor >= 1")
    store = open_store(db)
    c = _resolve(store, candidate)
    b = _base(store, base, c, allow_no_base)
    if b is None:
        _write(no_base_text(format, store.run(c)), output)
        return
    if b == c:  # on stderr: stdout stays the comparison (json, markdown) alone
        err_console.print(f"note: base {base!r} and candidate {candidate!r} are the same run, {c}: it is compared "
                          "with itself, so nothing can have changed", markup=False, highlight=False)
    cmp = compare_runs(load_run(store, b), load_run(store, c),
                       Thresholds(min_latency, min_warm, min_cold, alpha, error_factor, min_compile_s, error_floor),
                       allow_missing)
    _write(FORMATS[format](cmp), output)
    if cmp.regressions:
        raise typer.Exit(1)


def _base(store, base: str, candidate: str, allow_no_base: bool) -> str | None:
    """The base run's id; None when `base` is 'previous', there is none and `allow_no_base`; else exit 2."""
    try:
        return resolve_run(store, base, relative_to=candidate)
    except NoPreviousRun as exc:
        if allow_no_base:
            return None
        fail(str(exc))
    except StoreError as exc:
        fail(str(exc))


def no_base_text(format: str, run: dict) -> str:
    """What `compare --allow-no-base` prints, in `format`, when the candidate `run` (a store.run() row) has no
    earlier complete run of its config on its hardware."""
    candidate, status = run["run_id"], run["status"]
    then = ("it will be the base of the next comparison" if status == "complete" else
            f"it is {status}, so it will not be a base")
    note = (f"nothing to compare: no complete run of config {run.get('config_name')!r} on this hardware started "
            f"before run {candidate}; {then}")
    if format == "json":
        return json.dumps({"base": None, "candidate": candidate, "regressions": 0, "note": note}, indent=2)
    if format == "markdown":
        return f"### bakeoff compare: no baseline yet\n\n{note[0].upper()}{note[1:]}."
    return note


def _write(text: str, output: Path | None) -> None:
    """A comparison's text to stdout and, with -o, to that file (an unwritable file exits 2)."""
    sys.stdout.write(text + "\n")
    if output is not None:
        try:
            output.write_text(text + "\n")
        except OSError as exc:
            fail(f"{output}: cannot write: {exc.strerror}")


def dashboard(output: Path = typer.Option(Path("site"), "-o", "--output", help="Folder for the static site"),
              fail_on_regression: bool = typer.Option(False, "--fail-on-regression",
                                                      help="Exit 1 when any series is a regression or any case "
                                                           "went from ok to a failure (accuracy, status); "
                                                           "suspicious series alone do not fail"),
              db: Optional[str] = DB_OPTION) -> None:
    """Write a static site of trend charts over the store's history, regressions flagged. Prints a summary line
    (N regression(s), M suspicious, K of S series judged); with --fail-on-regression, exit code 1 when N > 0,
    for a CI gate."""
    from bakeoff.results.report.dashboard import build_dashboard, summary, summary_line  # plotly: this command only
    from bakeoff.results.report.history import load_history

    store = open_store(db)
    if not store.runs(limit=1):
        fail(f"no runs in {store.url} yet: start one with `bakeoff run`")
    h = load_history(store)
    pages = build_dashboard(store, output, h)
    console.print(summary_line(h), markup=False, highlight=False)
    console.print(f"wrote {output}/index.html and {len(pages) - 1} workload page(s)", markup=False, highlight=False)
    if fail_on_regression and summary(h)["regressions"]:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add report, compare and dashboard to `app`."""
    app.command()(report)
    app.command()(compare)
    app.command()(dashboard)
