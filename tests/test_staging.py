"""Artifacts appear in place only for committed records: `recover` finishes the move of a committed case's
staged artifacts after a crash, and deletes what a case without a record staged; `pack`/`unpack` (the Ray
path) round-trip files and refuse paths that would leave the case's folder."""
from __future__ import annotations

import pytest

from bakeoff.harness.plan.cases import Case
from bakeoff.harness.supervise.staging import final_dir, pack, publish, recover, staging_dir, unpack


def case(case_id: str) -> Case:
    return Case(case_id=case_id, workload="w", preset="smoke", shape="N=4", dims={"N": 4}, dtype="float32",
                label="eager", device="cpu", graph={}, options={}, seeds=(0,), timing={}, timeout_s=60,
                warm_compile=False, flops=0, bytes_moved=0)


def test_recover_publishes_committed_and_drops_the_rest(tmp_path):
    committed, killed = case("w/N=4/float32/eager"), case("w/N=4/float32/x'; DROP TABLE runs; --")
    for c in (committed, killed):
        staging_dir(tmp_path, c).mkdir(parents=True)
        (staging_dir(tmp_path, c) / "kernel.txt").write_text(c.case_id)
    recover(tmp_path, [committed, killed], done={committed.case_id})
    assert (final_dir(tmp_path, committed) / "kernel.txt").read_text() == committed.case_id
    assert not final_dir(tmp_path, killed).exists()
    assert not (tmp_path / "staging").exists()  # emptied, then removed
    assert final_dir(tmp_path, killed).parent == tmp_path / "artifacts"  # the label cannot escape the folder
    publish(tmp_path, committed)  # nothing staged: a no-op that keeps what is in place
    assert (final_dir(tmp_path, committed) / "kernel.txt").exists()


def test_pack_unpack_round_trip_and_refuse_escapes(tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("a")
    (src / "sub" / "b.bin").write_bytes(b"\0\1")
    files = pack(src)
    unpack(files, tmp_path / "dst")
    assert (tmp_path / "dst" / "sub" / "b.bin").read_bytes() == b"\0\1" and (tmp_path / "dst" / "a.txt").read_text() == "a"
    with pytest.raises(ValueError, match="leaves"):
        unpack({"../evil.txt": b"x"}, tmp_path / "dst2")
    assert not (tmp_path / "evil.txt").exists()
