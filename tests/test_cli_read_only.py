"""The commands that only read the results store: a store that does not exist is refused (exit 2), not
created; `show latest`; `export -o` into a folder that does not exist."""
from __future__ import annotations

import pytest

from conftest import bakeoff
from bakeoff.results.store import Store

READ_ONLY = [("show",), ("show", "nope"), ("export", "nope"), ("report", "nope"), ("compare", "previous", "latest"),
             ("dashboard",), ("run", "--resume", "nope")]


@pytest.mark.parametrize("args", READ_ONLY, ids=" ".join)
def test_a_read_only_command_refuses_a_store_that_does_not_exist(tmp_path, args):
    db = tmp_path / "sub" / "s.db"
    proc = bakeoff(*args, "--db", f"sqlite:///{db}", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert f"no results store at {db}: run `bakeoff run` first, or check --db" in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == []  # no store, no folder for it, no report


def test_the_default_store_is_not_created_by_show(tmp_path):
    proc = bakeoff("show", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and "no results store at results/bakeoff.db" in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == []


def _one_run(tmp_path) -> tuple[str, str]:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    run_id = Store(db).create_run(config_name="c", config_path="c.yaml", config_text="name: c\n", device="cpu",
                                  environment={"fingerprint": "f", "filters": {}}, n_cases=1)
    return db, run_id


def test_show_takes_latest_as_export_does(tmp_path):
    db, run_id = _one_run(tmp_path)
    proc = bakeoff("show", "latest", "--db", db, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0 and f"run {run_id} (running)" in proc.stdout, (proc.stdout, proc.stderr)


@pytest.mark.parametrize("fmt", ["json", "csv", "parquet"])
def test_export_into_a_missing_folder_says_why(tmp_path, fmt):
    db, _ = _one_run(tmp_path)
    out = tmp_path / "missing" / f"x.{fmt}"
    proc = bakeoff("export", "latest", "-f", fmt, "-o", str(out), "--db", db, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and f"{out}: cannot write: " in proc.stderr, proc.stderr
    assert ("No such file or directory" if fmt == "json" else "Cannot save file into a non-existent directory") \
        in proc.stderr and "None" not in proc.stderr, proc.stderr
