"""The Inductor CPU probe's answer kept per machine, so that a run does not probe again what an earlier run of
this machine already probed (inductor_cpu.py: 4 g++ builds and loads side by side and the ISA extension
checks, about 12 s of a run on the 2-core CPU machine).

What the probe answers depends only on the machine and its toolchain, never on a case, so its answer is kept
under a key made of everything it reads, each found without importing torch:

- torch: its version and the SHA-256 of `torch/_inductor/cpu_vec_isa.py` (the ISAs, their flags, the check
  programs) and of `torch/_inductor/codecache.py` (where the precompiled-header folder is named);
- the C++ compiler Inductor would use (`$CXX`, else `g++`): its resolved path, size, modification time and
  `--version` line;
- the CPU: `/proc/cpuinfo`'s model name and flags of the first processor;
- this probe: the SHA-256 of inductor_cpu_probe.py, the Python executable;
- where the headers go: the temporary folder and the user; every `TORCHINDUCTOR_*` variable but the cache
  folder (which the probe sets itself), and `CC`, `CXX`, `CPATH`, `TORCH_INDUCTOR_INSTALL_GXX`.

Any change of one of these is another key, so the probe runs again. The answer is kept in
`$BAKEOFF_PROBE_CACHE` (else `$XDG_CACHE_HOME/bakeoff`, else `~/.cache/bakeoff`); `BAKEOFF_PROBE_CACHE=0`
probes every run. Only a probe that ran to the end is kept. An answer read back says so in every Inductor
record's `compile_notes` (the file, when it was probed and how long that took).
"""
from __future__ import annotations

import getpass
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bakeoff.backends.base import dist_version, user_cache_dir

ENV_CACHE = "BAKEOFF_PROBE_CACHE"  # a folder; "0" keeps nothing
ENV_VARIABLES = ("CC", "CXX", "CPATH", "TORCH_INDUCTOR_INSTALL_GXX")
FILE_PREFIX = "inductor_cpu_probe-"


def cache_folder() -> Path | None:
    """Where probe answers are kept; None when BAKEOFF_PROBE_CACHE=0."""
    chosen = os.environ.get(ENV_CACHE)
    if chosen == "0":
        return None
    return Path(chosen) if chosen else user_cache_dir()


def machine_key() -> dict[str, Any]:
    """Everything the probe's answer depends on (see the module's docstring)."""
    torch_dir = _torch_dir()
    compiler = os.environ.get("CXX") or "g++"
    return {
        "torch": dist_version("torch"),
        "cpu_vec_isa_sha256": _sha256(torch_dir / "_inductor" / "cpu_vec_isa.py") if torch_dir else None,
        "codecache_sha256": _sha256(torch_dir / "_inductor" / "codecache.py") if torch_dir else None,
        "compiler": _compiler(compiler),
        "cpu": _cpu(),
        "probe_sha256": _sha256(Path(__file__).with_name("inductor_cpu_probe.py")),
        "python": os.path.realpath(sys.executable),
        "tmp": tempfile.gettempdir(),
        "user": _user(),
        "env": {k: v for k, v in sorted(os.environ.items())
                if (k.startswith("TORCHINDUCTOR_") and k != "TORCHINDUCTOR_CACHE_DIR") or k in ENV_VARIABLES},
    }


def key_file(folder: Path, key: dict[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    return folder / f"{FILE_PREFIX}{digest}.json"


def read(key: dict[str, Any]) -> dict[str, Any] | None:
    """The kept answer for `key`, with `cached` (file, probed_at) added; None when there is none."""
    folder = cache_folder()
    if folder is None:
        return None
    path = key_file(folder, key)
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(kept, dict) or kept.get("key") != key or not isinstance(kept.get("probe"), dict):
        return None  # another key's file under a colliding name, or a file cut short: probe again
    return {**kept["probe"], "cached": {"file": str(path), "probed_at": kept.get("probed_at")}}


def write(key: dict[str, Any], probe: dict[str, Any]) -> None:
    """Keep `probe` under `key` (atomically); a probe that failed, or a folder that cannot be written, keeps
    nothing."""
    folder = cache_folder()
    if folder is None or "error" in probe:
        return
    path = key_file(folder, key)
    body = {"key": key, "probe": probe, "probed_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=folder, prefix=path.name, suffix=".part", delete=False) as f:
            json.dump(body, f, sort_keys=True)
        os.replace(f.name, path)
    except OSError:
        return


def _torch_dir() -> Path | None:
    spec = importlib.util.find_spec("torch")
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]) if locations else None


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _compiler(name: str) -> dict[str, Any]:
    found = shutil.which(name)
    if not found:
        return {"name": name, "found": None}
    real = os.path.realpath(found)
    st = os.stat(real)
    try:
        version = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=30,
                                 stdin=subprocess.DEVNULL).stdout.splitlines()[:1]
    except (OSError, subprocess.SubprocessError):
        version = []
    return {"name": name, "found": real, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "version": version}


def _cpu() -> dict[str, str | None]:
    """The first processor's model name and flags (`/proc/cpuinfo`; the platform's machine elsewhere)."""
    out: dict[str, str | None] = {"machine": os.uname().machine if hasattr(os, "uname") else None}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        name, _, value = line.partition(":")
        name = name.strip()
        if name in ("model name", "flags", "Features") and name not in out:
            out[name] = value.strip()
        if not line.strip() and len(out) > 1:
            break  # the first processor's block ends
    return out


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid()) if hasattr(os, "getuid") else ""
