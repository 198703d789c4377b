"""benchmarks/gpu.sh's pack_out: a job's files into one tarball in $OUT (a device call returns a few files only);
`clear` leaves that tarball alone in $OUT, `keep` leaves beside it what $OUT held."""
from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

from test_gpu_sh_ort import _function


def _pack(out: Path, *args: str) -> subprocess.CompletedProcess:
    script = f"{_function('pack_out')}\nOUT={out}\npack_out \"$@\"\n"
    return subprocess.run(["bash", "-c", script, "gpu.sh", *args], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin"})


def _names(tgz: Path) -> set[str]:
    with tarfile.open(tgz) as t:
        return {Path(n).name for n in t.getnames() if n != "."}


def test_clear_packs_out_into_its_own_tarball_alone(tmp_path):
    out = tmp_path / "out"
    (out / "logs").mkdir(parents=True)
    (out / "run.log").write_text("x")
    (out / "logs" / "a.txt").write_text("y")
    done = _pack(out, "suite", str(out), "clear")
    assert done.returncode == 0 and done.stdout == "suite.tar.gz: tar xzf it into DIR\n", done.stderr
    assert [p.name for p in out.iterdir()] == ["suite.tar.gz"]
    assert _names(out / "suite.tar.gz") == {"run.log", "logs", "a.txt"}


def test_keep_leaves_what_out_holds_beside_the_tarball(tmp_path):
    out, src = tmp_path / "out", tmp_path / "inject-out"
    out.mkdir()
    src.mkdir()
    (out / "tritongen_vs_inductor.json").write_text("{}")
    (src / "quiet.db").write_text("z")
    done = _pack(out, "inject", str(src), "keep", ", then --tables DIR")
    assert done.returncode == 0 and done.stdout == "inject.tar.gz: tar xzf it into DIR, then --tables DIR\n"
    assert sorted(p.name for p in out.iterdir()) == ["inject.tar.gz", "tritongen_vs_inductor.json"]
    assert _names(out / "inject.tar.gz") == {"quiet.db"} and (src / "quiet.db").exists()


def test_neither_clear_nor_keep_packs_nothing(tmp_path):
    done = _pack(tmp_path, "checks", str(tmp_path), "yes")
    assert done.returncode == 2 and "clear or keep $OUT, not 'yes'" in done.stderr
    assert list(tmp_path.iterdir()) == []
