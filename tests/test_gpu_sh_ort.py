"""benchmarks/gpu.sh's install_ort: onnxruntime-gpu from the parts carried into .ort/ over several device calls,
tried here on a small stand-in wheel cut the way ../shared/gpu/ort_parts.sh cuts the real one."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

GPU_SH = Path(__file__).resolve().parent.parent / "benchmarks" / "gpu.sh"
WHEEL = "onnxruntime_gpu-9.9.9-py3-none-any.whl"


def _function(name: str) -> str:
    lines = GPU_SH.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{name}() {{"))
    end = next(i for i in range(start, len(lines)) if lines[i] == "}")
    return "\n".join(lines[start:end + 1])


def _parts(root: Path, parts: int = 3) -> None:
    """A stand-in onnxruntime wheel under root/.ort/, cut into `parts` parts, and .ort/wheel naming it."""
    whl = root / WHEEL
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr("onnxruntime/__init__.py", "__version__ = '9.9.9'\n"
                   "def get_available_providers():\n    return ['CUDAExecutionProvider']\n" + "#" * 4000 + "\n")
        info = "onnxruntime_gpu-9.9.9.dist-info/"
        z.writestr(info + "METADATA", "Metadata-Version: 2.1\nName: onnxruntime-gpu\nVersion: 9.9.9\n")
        z.writestr(info + "WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(info + "RECORD", "")
    data, ort = whl.read_bytes(), root / ".ort"
    ort.mkdir()
    size = len(data) // parts + 1
    for i in range(parts):
        (ort / f"part{i:02d}").write_bytes(data[i * size:(i + 1) * size])
    (ort / "wheel").write_text(WHEEL + "\n")
    whl.unlink()


def _install(root: Path, site: Path) -> subprocess.CompletedProcess:
    script = f"{_function('install_ort')}\nR={root}\ninstall_ort {site}\n"
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120,
                          env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"})


@pytest.mark.skipif(subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode != 0,
                    reason="needs pip")
def test_every_part_there_installs_once_a_part_missing_names_those_found(tmp_path):
    _parts(tmp_path)
    (tmp_path / ".ort" / "part01").rename(tmp_path / "part01")  # its call has not come yet
    site = tmp_path / "site"
    missing = _install(tmp_path, site)
    assert missing.returncode == 1 and not (site / "onnxruntime").exists()
    assert "did not install from .ort/ (part00 part02 wheel ): carry every part" in missing.stderr
    (tmp_path / "part01").rename(tmp_path / ".ort" / "part01")
    done = _install(tmp_path, site)
    assert done.returncode == 0, done.stderr
    assert "onnxruntime 9.9.9 ['CUDAExecutionProvider']" in done.stdout
    again = _install(tmp_path, site)  # a later call on the same machine: installed already
    assert again.returncode == 0 and again.stdout == ""


def test_without_the_wheel_name_nothing_is_installed(tmp_path):
    """Before the last part's call (.ort/wheel travels with it), or with no parts at all: the image's build."""
    _parts(tmp_path)
    (tmp_path / ".ort" / "wheel").unlink()
    got = _install(tmp_path, tmp_path / "site")
    assert got.returncode == 0 and not (tmp_path / "site").exists()
