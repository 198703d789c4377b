"""Artifacts a Ray task sends back that cannot be unpacked (a path leaving the case's folder) cost the case
its artifacts, kept as `artifacts_error` on its record; they neither abort the run nor escape stop()'s
cleanup. Ray's calls are replaced by fakes: no cluster is started."""
from __future__ import annotations

import pytest

from ci_required import importorskip
from bakeoff.harness.run.executors.ray_executor import RayExecutor
from bakeoff.harness.supervise.staging import staging_dir
from test_staging import case

ray = importorskip("ray", reason="Ray is not installed (pip install 'bakeoff[scale]')")

BAD = {"kernel.txt": b"k", "../../escape.txt": b"x"}
GOOD = {"kernel.txt": b"k"}


class Ref:
    def __init__(self, out):
        self.out = out


class FakeTask:
    def __init__(self, outputs):
        self.outputs = outputs

    def options(self, **_):
        return self

    def remote(self, case_json):
        return Ref(self.outputs.pop(0))


@pytest.fixture
def executor(monkeypatch):
    monkeypatch.setattr(ray, "get", lambda ref: ref.out)
    monkeypatch.setattr(ray, "wait", lambda refs, num_returns=1, timeout=None: (refs[:num_returns], refs[num_returns:]))
    monkeypatch.setattr(ray, "cancel", lambda ref, force=False: None)
    ex = RayExecutor.__new__(RayExecutor)  # no cluster
    ex.device, ex.jobs, ex.address = "cpu", None, None
    ex._inflight, ex._drained, ex._work_dir, ex._owns_ray = {}, [], None, False
    return ex


def _check(record, work_dir, c, bad: bool) -> None:
    if bad:
        assert "leaves" in record["artifacts_error"] and "artifacts_dir" not in record
        assert not staging_dir(work_dir, c).exists()  # what was unpacked before the bad path is gone
        assert not (work_dir / "escape.txt").exists() and not (work_dir.parent / "escape.txt").exists()
    else:
        assert record["artifacts_dir"] and "artifacts_error" not in record


def test_bad_artifacts_in_run_keep_the_record(tmp_path, monkeypatch, executor):
    bad, good = case("w/N=4/float32/bad"), case("w/N=4/float32/good")
    outputs = [{"record": {"status": "ok", "reason": None}, "artifacts": dict(BAD)},
               {"record": {"status": "ok", "reason": None}, "artifacts": dict(GOOD)}]
    monkeypatch.setattr(ray, "remote", lambda fn: FakeTask(outputs))
    work = tmp_path / "work"
    results = list(executor.run([bad, good], work))
    assert [(c.case_id, r["status"]) for c, r in results] == [(bad.case_id, "ok"), (good.case_id, "ok")]
    _check(results[0][1], work, bad, True)
    _check(results[1][1], work, good, False)


def test_bad_artifacts_in_stop_keep_the_record(tmp_path, executor):
    bad, good = case("w/N=4/float32/bad"), case("w/N=4/float32/good")
    work = tmp_path / "work"
    executor._work_dir = work
    executor._inflight = {Ref({"record": {"status": "ok", "reason": None}, "artifacts": dict(BAD)}): bad,
                          Ref({"record": {"status": "ok", "reason": None}, "artifacts": dict(GOOD)}): good}
    executor.stop()
    kept = executor.drain()
    assert [(c.case_id, r["status"]) for c, r in kept] == [(bad.case_id, "ok"), (good.case_id, "ok")]
    _check(kept[0][1], work, bad, True)
    _check(kept[1][1], work, good, False)
    assert not executor._inflight
