"""The nightly CI workflow (.github/workflows/nightly.yml) as its runner would execute it: every `bakeoff` call in
it parses against the CLI, the extras it installs exist, and its steps, run night after night on a tiny CPU
config, compare each night with the one before (the first night has no base and passes)."""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import tomllib
from pathlib import Path

import yaml

from cli_parse import is_usage_error, parse
from conftest import REPO, bakeoff, bakeoff_cmd

WORKFLOW = REPO / ".github" / "workflows" / "nightly.yml"
RUN_ID = "20261101-021700-abcdef"  # what "$(cat run_id.txt)" stands for when a call is parsed


def _scripts() -> dict[str, str]:
    """Each step's `run` script by step name, line continuations joined."""
    doc = yaml.safe_load(WORKFLOW.read_text())
    steps = [s for job in doc["jobs"].values() for s in job.get("steps", [])]
    return {s.get("name", s.get("uses", "?")): s["run"].replace("\\\n", " ") for s in steps if "run" in s}


def _bakeoff_calls(script: str) -> list[list[str]]:
    """The arguments of every `.venv/bin/bakeoff` call in a shell script, its shell expansions replaced by
    values of their kind."""
    calls = []
    for line in script.splitlines():
        for part in re.split(r"&&|;|\bthen\b", line):
            part = (part.replace('"$(cat run_id.txt)"', RUN_ID).replace('"$DB"', "sqlite:///store/bakeoff.db")
                    .strip())
            if part.startswith(".venv/bin/bakeoff "):
                calls.append(shlex.split(part)[1:])
    return calls


def test_every_bakeoff_call_in_the_workflow_parses():
    calls = [c for script in _scripts().values() for c in _bakeoff_calls(script)]
    assert {c[0] for c in calls} >= {"doctor", "run", "compare", "dashboard", "report"}
    for call in calls:
        parse(call)
    # The check can fail: an option the CLI lacks is refused.
    for wrong in (["compare", "previous", RUN_ID, "--no-such-option"], ["run", "--jobs", "many"], ["compare"]):
        try:
            parse(wrong)
        except Exception as exc:  # noqa: BLE001 (checked just below)
            assert is_usage_error(exc), exc
        else:
            raise AssertionError(f"bakeoff {' '.join(wrong)} parsed")


def test_the_workflow_calls_the_cli_only_and_installs_extras_that_exist():
    scripts = "\n".join(_scripts().values())
    assert "python -c" not in scripts and "bin/python " not in scripts  # module paths move; the CLI stays
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    installs = re.findall(r"pip install -q -e '\.\[([^\]]+)\]'", scripts)
    assert installs, "the workflow installs bakeoff with its extras"
    for names in installs:
        assert set(names.split(",")) <= set(extras), names
    for config in re.findall(r"bakeoff run (\S+\.yaml)", scripts):
        assert (REPO / config).exists(), config


CONFIG = """
name: tiny-nightly
device: cpu
preset: smoke
dtypes: [float32]
workloads: [softmax]
backends:
  eager: {}
timing: {warmup_s: 0.01, budget_s: 0.05, min_reps: 3}
compile: {warm: false}
timeout_s: 300
"""


def _night(tmp_path: Path, db: str) -> subprocess.CompletedProcess:
    """The workflow's run and compare steps, as written in it, on the tiny config."""
    scripts = _scripts()
    run = scripts["Run the nightly benchmark"].replace("configs/nightly.yaml", "tiny.yaml")
    compare = scripts["Compare with the previous night"]
    script = (run + "\n" + compare).replace(".venv/bin/bakeoff", shlex.join(bakeoff_cmd()))
    return subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "DB": db, "COLUMNS": "200"}, timeout=900)


def test_nights_in_a_row_compare_with_the_night_before(tmp_path):
    (tmp_path / "tiny.yaml").write_text(CONFIG)
    db = f"sqlite:///{tmp_path / 'store.db'}"
    first = _night(tmp_path, db)
    assert first.returncode == 0, first.stdout + first.stderr
    night1 = (tmp_path / "run_id.txt").read_text().strip()
    summary = (tmp_path / "compare.md").read_text()
    assert "no baseline yet" in summary and night1 in summary and "base of the next comparison" in summary
    # Another config's run lands in between (a shared store): it is neither tonight's run nor its base.
    other = tmp_path / "other.yaml"
    other.write_text(CONFIG.replace("tiny-nightly", "ad-hoc"))
    bakeoff("run", str(other), "--db", db, cwd=tmp_path, check=True)
    second = _night(tmp_path, db)
    night2 = (tmp_path / "run_id.txt").read_text().strip()
    assert night2 != night1
    assert f"{night1} (base) → {night2} (candidate)" in (tmp_path / "compare.md").read_text()
    assert second.returncode in (0, 1), second.stdout + second.stderr  # 1 only for a regression found
    doc = json.loads(bakeoff("compare", "previous", night2, "--format", "json", "--db", db, cwd=tmp_path,
                             check=False).stdout)
    assert doc["base"] == night1


def test_run_id_file_is_removed_first_and_its_folder_checked(tmp_path):
    (tmp_path / "tiny.yaml").write_text(CONFIG)
    stale = tmp_path / "run_id.txt"
    stale.write_text("an-older-run\n")
    bad = bakeoff("run", "tiny.yaml", "--run-id-file", "run_id.txt", "--preset", "nope",
                  "--db", f"sqlite:///{tmp_path / 's.db'}", cwd=tmp_path)
    assert bad.returncode == 2 and not (tmp_path / "s.db").exists()
    assert not stale.exists()  # a failed start never leaves an older run's id to be compared
    proc = bakeoff("run", "tiny.yaml", "--run-id-file", "no/such/folder/id.txt",
                   "--db", f"sqlite:///{tmp_path / 's.db'}", cwd=tmp_path)
    assert proc.returncode == 2 and "folder no/such/folder does not exist" in proc.stderr
    assert not (tmp_path / "s.db").exists()


def test_allow_no_base_in_each_format_and_only_for_a_missing_previous(tmp_path):
    (tmp_path / "tiny.yaml").write_text(CONFIG)
    db = f"sqlite:///{tmp_path / 's.db'}"
    bakeoff("run", "tiny.yaml", "--run-id-file", "id.txt", "--db", db, cwd=tmp_path, check=True)
    run_id = (tmp_path / "id.txt").read_text().strip()
    plain = bakeoff("compare", "previous", run_id, "--db", db, cwd=tmp_path)
    assert plain.returncode == 2 and "no complete run of config 'tiny-nightly'" in plain.stderr
    doc = json.loads(bakeoff("compare", "previous", run_id, "--allow-no-base", "-f", "json", "--db", db,
                             cwd=tmp_path, check=True).stdout)
    assert doc["base"] is None and doc["candidate"] == run_id and doc["regressions"] == 0
    text = bakeoff("compare", "previous", run_id, "--allow-no-base", "--db", db, cwd=tmp_path, check=True).stdout
    assert text.startswith("nothing to compare: no complete run of config 'tiny-nightly'")
    # A run id that does not exist is still bad input, with or without the option.
    unknown = bakeoff("compare", "nope", run_id, "--allow-no-base", "--db", db, cwd=tmp_path)
    assert unknown.returncode == 2 and "no run 'nope'" in unknown.stderr
