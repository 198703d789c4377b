"""Where a case's time goes: the gate policy a run's cases get, and the run's elapsed overhead share. The
smoke run's phases are checked in tests/test_cli_smoke.py (every test of that session fixture in one file). A crashed worker's phases: tests/test_faults.py."""
from __future__ import annotations

import datetime as dt
import io
import json

from rich.console import Console

from conftest import bakeoff
from bakeoff.harness.cli import app
from bakeoff.harness.cli.overhead import elapsed_s


GATE_CONFIG = """
name: gate_policy
device: cpu
preset: smoke
dtypes: [float32]
workloads: [ew_sigmoid_relu, rmsnorm]
backends: [eager]
seeds: [0, 1]
timing: {warmup_s: 0.01, budget_s: 0.05, min_reps: 3, gate: timers_only}
compile: {warm: false}
"""


def test_the_gate_policy_comes_from_the_config_or_the_command_line(tmp_path):
    (tmp_path / "g.yaml").write_text(GATE_CONFIG)
    db = f"sqlite:///{tmp_path / 'g.db'}"
    bad = bakeoff("run", "g.yaml", "--gate", "sometimes", "--db", db, cwd=tmp_path)
    assert bad.returncode == 2 and "--gate must be one of auto, exclusive, timers_only" in bad.stderr
    assert not (tmp_path / "g.db").exists()  # nothing written

    def policies(*args: str) -> set[str]:
        bakeoff("run", "g.yaml", *args, "--db", db, cwd=tmp_path, check=True)
        records = json.loads(bakeoff("export", "latest", "--db", db, cwd=tmp_path, check=True).stdout)
        assert all(r["status"] == "ok" for r in records)
        return {r["gate_policy"] for r in records}

    assert policies() == {"timers_only"}  # the config's
    assert policies("--gate", "exclusive") == {"exclusive"}  # the command line's
    assert policies("--gate", "auto") == {"exclusive"}  # auto, on the CPU: every figure is host-timed
    records = json.loads(bakeoff("export", "latest", "--db", db, cwd=tmp_path, check=True).stdout)
    assert all(r["gate_policy_reason"].startswith("auto: on the CPU") for r in records), records
    (tmp_path / "g.yaml").write_text(GATE_CONFIG.replace("gate: timers_only", "gate: always"))
    refused = bakeoff("run", "g.yaml", "--db", db, cwd=tmp_path)
    assert refused.returncode == 2 and "gate" in refused.stderr


def test_the_elapsed_share_counts_each_second_once_however_many_cases_overlap():
    from bakeoff.harness.cli.overhead import elapsed_line, elapsed_split

    records = [{"compile_windows_epoch_s": [[0, 1], [5, 6]], "timing_windows_epoch_s": [[1, 2]]},
               {"compile_windows_epoch_s": [[0.5, 1.5]],
                "details": {"timing_windows_epoch_s": [[1.8, 3]]}},  # as stored
               {"status": "skipped"}]
    split = elapsed_split(records, 10.0)
    assert split == {"elapsed_s": 10.0, "measuring_s": 4.0, "timing_s": 2.0, "overhead_share": 0.6}
    assert "during 40% (timing 20%): overhead 60%" in elapsed_line(records, 10.0)
    assert elapsed_split([{"timing_windows_epoch_s": [[0, 1]]}], 10.0) is None  # a run recorded before compile windows
    assert elapsed_line(records, None) is None


def test_a_resumed_run_is_timed_from_its_resume_and_only_its_resumes_cases_count(monkeypatch):
    utc = dt.timezone.utc
    start, resumed, end = (dt.datetime(2030, 1, 1, 0, m, tzinfo=utc) for m in (0, 50, 51))
    fresh = {"started_at": start, "ended_at": start + dt.timedelta(seconds=30), "resumes": 0}
    run = {"started_at": start, "ended_at": end.replace(tzinfo=None), "resumes": 1}  # as SQLite gives it back
    assert elapsed_s(fresh) == 30.0 and elapsed_s(fresh, resumed) == 30.0
    assert elapsed_s(run) is None  # from the run's start: the pause between sessions too
    assert elapsed_s(run, resumed) == 60.0
    assert elapsed_s(run, end + dt.timedelta(seconds=1)) is None  # ended before: found complete, not resumed

    records = [{"attempt": 1, "wall_s": 7.0}, {"attempt": 2, "wall_s": 2.0}, {"attempt": 2, "status": "skipped"}]
    out = io.StringIO()
    monkeypatch.setattr(app, "console", Console(file=out, width=200))
    app._print_totals(run, records, resumed)
    app._print_totals(run, records)
    first, second = out.getvalue().splitlines()
    assert first.startswith("this resume: 1 cases ran for 2.0 s of worker time (60.0 s elapsed)"), first
    assert second.startswith("2 cases ran for 9.0 s of worker time: "), second
