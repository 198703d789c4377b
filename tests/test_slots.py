"""How `--jobs N` lays workers out: pinned one per GPU (dealt in turn), or N CPU workers sharing one gate;
impossible requests exit 2 before anything is written."""
from __future__ import annotations

import pytest

from conftest import bakeoff
from bakeoff.harness.supervise.slots import local_slots


def test_gpu_slots_are_pinned_and_dealt_in_turn(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    two = local_slots("cuda", 2)
    assert [s.label for s in two] == ["gpu2", "gpu5"]
    assert [dict(s.env) for s in two] == [{"CUDA_VISIBLE_DEVICES": "2"}, {"CUDA_VISIBLE_DEVICES": "5"}]
    assert {s.device for s in two} == {"cuda:0"} and len({s.gate for s in two}) == 2  # a gate per GPU
    four = local_slots("cuda", 4)
    assert [s.label for s in four] == ["gpu2#0", "gpu5#0", "gpu2#1", "gpu5#1"]
    assert four[0].gate == four[2].gate != four[1].gate  # workers on one GPU share its gate
    pinned = local_slots("cuda:1", 2)
    assert {dict(s.env)["CUDA_VISIBLE_DEVICES"] for s in pinned} == {"5"}
    single = local_slots("cuda:1", 1)[0]
    assert single.device is None and single.env == () and single.gate == two[1].gate
    with pytest.raises(ValueError, match="only 2 GPU"):
        local_slots("cuda:3", 1)


def test_host_scope_puts_every_gpu_behind_one_gate(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setenv("BAKEOFF_GATE_SCOPE", "host")
    assert len({s.gate for s in local_slots("cuda", 2) + local_slots("cpu", 1)}) == 1


def test_cpu_slots_share_one_gate():
    slots = local_slots("cpu", 3)
    assert [s.label for s in slots] == ["cpu#0", "cpu#1", "cpu#2"]
    assert len({s.gate for s in slots}) == 1 and all(s.device is None and s.env == () for s in slots)


@pytest.mark.parametrize("args,needle", [
    (["--jobs", "0"], "--jobs must be at least 1"),
    (["--executor", "dask"], "--executor must be one of local, ray"),
    (["--ray-address", "127.0.0.1:1"], "--ray-address goes with --executor ray"),
], ids=["zero jobs", "unknown executor", "address without ray"])
def test_bad_executor_arguments_exit_2(tmp_path, args, needle):
    (tmp_path / "c.yaml").write_text("name: t\ndevice: cpu\npreset: smoke\nworkloads: [softmax]\nbackends: [eager]\n")
    db = tmp_path / "s.db"
    proc = bakeoff("run", "c.yaml", *args, "--db", f"sqlite:///{db}", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and needle in proc.stderr, (proc.stdout, proc.stderr)
    if db.exists():
        import sqlite3

        assert sqlite3.connect(db).execute("select count(*) from runs").fetchone()[0] == 0
