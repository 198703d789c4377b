"""Inductor's start-up on the CPU: two pieces of machine work the harness does once per run, not in every worker.

A fresh Inductor process with empty cache folders (every cold and every warm worker) spends, before its first
C++ kernel, time on two things that depend on the machine and its toolchain, never on the case (2-core CPU
machine, torch 2.13, docs/EVIDENCE.md):

- Vector-ISA checks (torch/_inductor/cpu_vec_isa.py). For each ISA the CPU's flags report (AVX2, AVX-512,
  AVX-512 VNNI, AMX here) Inductor compiles a program using ATen's vectorized math into the cache folder and
  loads it in a child process: 4 g++ runs of about 2 s and 4 loads, 10.8 s of a cold worker's 14 s of checks;
  the rest are smaller checks of ISA extensions (AVX-512 BF16, VNNI, AMX tiles) that only include
  <immintrin.h>. Inductor's supported setting `cpp.vec_isa_ok` (TORCHINDUCTOR_VEC_ISA_OK=1) skips exactly the
  4 large checks and keeps the small ones. The harness runs those 4 checks once per run in a scratch cache
  folder, side by side (inductor_cpu_probe.py, which says why that decides the question), and hands
  `TORCHINDUCTOR_VEC_ISA_OK=1` to the workers only when every one passed, i.e. when trusting the flags picks
  the ISA and arch flags that checking picks; otherwise every worker checks as before. Each Inductor
  record's `compile_notes` says which it was, with the probe's result. The answer is kept per machine
  (inductor_cpu_cache.py): a later run with the same torch, compiler, CPU and settings reads it back.
- Precompiled headers (codecache._precompile_header). Inductor precompiles its C++ kernel prelude
  (cpp_prefix.h, about 150 MB) into `<temporary folder>/torchinductor_<user>/precompiled_headers`, outside
  its cache folder on purpose ("these headers need to be global, rather than ignored by fresh_cache"),
  keyed by the preprocessed header, the command line and the compiler version. The harness gives every
  worker its own temporary folder, so every worker rebuilt it: 6.9 s cold and 5.9 s warm per case. A worker
  now links its header folder to the one Inductor uses on this machine (`header_dir` from the probe: the
  orchestrator's temporary folder), as any process of this user outside the harness would find it; the
  note says whether it was found there or built.

- ISA extension checks. A trusting worker still runs the small checks (AVX-512 BF16, VNNI, AMX tiles, AMX
  FP16): 6 g++ runs and loads of about 0.5 s each here, 3.0 s of a cold worker's process warm-up (0.1 s each
  in a warm worker, whose cache folder holds the built programs but which loads each in a child process
  again). The probe's trusting pass runs exactly these checks, in the same order with the same flags, and
  records each one's answer (inductor_cpu_probe.py); a worker that was handed TORCHINDUCTOR_VEC_ISA_OK=1
  takes the answer of a check whose ISA, arch flags and program are those the probe checked
  (`answer_extension_checks`), and builds any other itself. The note counts both.

None of these changes what a case compiles: its cache folders still start empty (cold) and its compile and the
kernels' flags are the same; both are in the process warm-up (`compile_process_setup_s`), never in the
case's own compile. `cpu_startup_env` runs in the orchestrator; `share_headers`, `answer_extension_checks`
and `startup_notes` in the worker.
"""
from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
import threading
from typing import Any

from bakeoff.backends import inductor_cpu_cache
from bakeoff.backends.inductor_cpu_probe import check_key
from bakeoff.owner import CASE_TMP_PREFIX, owned_prefix

ENV_PROBE = "BAKEOFF_INDUCTOR_CPU_PROBE"  # the run's probe (JSON), for the workers' notes
ENV_VEC_ISA_OK = "TORCHINDUCTOR_VEC_ISA_OK"  # Inductor's own variable for config.cpp.vec_isa_ok
PROBE_TIMEOUT_S = 600
_lock = threading.Lock()


def cpu_startup_env() -> dict[str, str]:
    """The variables every Inductor CPU worker of this run gets: the probe's result, and TORCHINDUCTOR_VEC_ISA_OK=1
    when trusting the CPU's flags picks what checking picks. Probed once per process (the orchestrator: once
    per run), on first use."""
    with _lock:
        probe = _probe()
    env = {ENV_PROBE: json.dumps(probe)}
    if _trust_is_equivalent(probe):
        env[ENV_VEC_ISA_OK] = "1"
    return env


def _trust_is_equivalent(probe: dict[str, Any]) -> bool:
    """Trusting the flags picks what checking picks: the base check of every ISA accepted passed."""
    checks = probe.get("base_checks") or {}
    return bool(probe.get("trusted")) and sorted(checks) == sorted(probe["trusted"]) and all(checks.values())


@functools.cache
def _probe() -> dict[str, Any]:
    """The probe's answer: kept from an earlier run of this machine under the same key (inductor_cpu_cache.py),
    else probed now and kept; {"error": ...} when it fails (the workers then check for themselves)."""
    key = inductor_cpu_cache.machine_key()
    kept = inductor_cpu_cache.read(key)
    if kept is not None:
        return kept
    probe = _run_probe()
    inductor_cpu_cache.write(key, probe)
    return probe


def _run_probe() -> dict[str, Any]:
    """inductor_cpu_probe.py in a child process with a scratch cache folder; {"error": ...} when it fails."""
    with tempfile.TemporaryDirectory(prefix=owned_prefix(CASE_TMP_PREFIX)) as scratch:  # leftovers' sweep knows it
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": scratch}
        try:
            proc = subprocess.run([sys.executable, "-m", "bakeoff.backends.inductor_cpu_probe"], env=env,
                                  capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return {"error": f"the probe took over {PROBE_TIMEOUT_S} s"}
        except OSError as exc:
            return {"error": f"the probe did not start: {exc}"[:300]}
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines:
            return {"error": f"the probe exited {proc.returncode}: {proc.stderr.strip()[-300:]}"}
        try:
            return json.loads(lines[-1])
        except json.JSONDecodeError:
            return {"error": f"the probe printed no JSON: {lines[-1][:200]}"}


_headers: dict[str, Any] = {}  # this worker process's header folder: {"linked_to": path, "found": n} or {"why": ...}


def share_headers() -> None:
    """In a worker, before its first compile: make Inductor's precompiled-header folder under this process's
    temporary folder a link to the run's (the probe's `header_dir`), once per process."""
    if _headers:
        return
    probe = _worker_probe()
    target = probe.get("header_dir")
    try:
        from torch._inductor import codecache

        mine = getattr(codecache, "_HEADER_DIR", None)  # private: absent in another torch, then not shared
    except ImportError:
        mine = None
    if not target or not mine:
        _headers["why"] = "not shared: " + ("the probe gave no header folder" if not target else
                                            "this torch has no codecache._HEADER_DIR")
        return
    if os.path.realpath(mine) == os.path.realpath(target):
        _headers.update(linked_to=target, found=_count_headers(target), same=True)
        return
    if os.path.lexists(mine):
        _headers["why"] = f"not shared: {mine} already exists"
        return
    os.makedirs(target, exist_ok=True)
    os.makedirs(os.path.dirname(mine), exist_ok=True)
    os.symlink(target, mine, target_is_directory=True)
    _headers.update(linked_to=target, found=_count_headers(target))


_extensions: dict[str, Any] = {}  # this worker's extension checks: {"answered": n, "built": n} or {"why": ...}


def answer_extension_checks() -> None:
    """In a worker handed TORCHINDUCTOR_VEC_ISA_OK=1, before its first compile: answer each of Inductor's ISA
    extension checks that the run's probe made with the same ISA, arch flags and program from the probe's
    record (`extension_checks`), and build and load any other as Inductor does; once per process."""
    if _extensions:
        return
    probe = _worker_probe()
    recorded = probe.get("extension_checks")
    handed = os.environ.get(ENV_VEC_ISA_OK) == "1" and _trust_is_equivalent(probe)
    if not handed or not isinstance(recorded, list):
        _extensions["why"] = "checked in this process: " + (
            "the run's probe recorded no extension checks" if handed else "the harness did not hand over cpp.vec_isa_ok")
        return
    import torch

    if probe.get("torch") != torch.__version__:
        _extensions["why"] = f"checked in this process: the probe ran torch {probe.get('torch')}, this is {torch.__version__}"
        return
    try:
        from torch._inductor import cpu_vec_isa

        original = cpu_vec_isa.VecISA.check_build  # private: absent in another torch, then nothing is answered
    except (ImportError, AttributeError):
        _extensions["why"] = "checked in this process: this torch has no cpu_vec_isa.VecISA.check_build"
        return

    answers = {_key_text(c): bool(c["passed"]) for c in recorded if isinstance(c, dict) and "passed" in c}
    _extensions.update(answered=0, built=0, probe_s=round(sum(float(c.get("seconds") or 0) for c in recorded), 2))

    def check_build(isa: Any, code: str) -> bool:
        key = _key_text(check_key(isa, code))
        if key in answers:
            _extensions["answered"] += 1
            return answers[key]
        _extensions["built"] += 1
        return original(isa, code)

    cpu_vec_isa.VecISA.check_build = check_build


def _key_text(check: dict[str, Any]) -> str:
    return json.dumps([check.get("isa"), check.get("flags"), check.get("code_sha256")])


def _count_headers(folder: str) -> int:
    try:
        return sum(name.endswith(".gch") for name in os.listdir(folder))
    except OSError:
        return 0


def _worker_probe() -> dict[str, Any]:
    try:
        return json.loads(os.environ.get(ENV_PROBE, "{}"))
    except json.JSONDecodeError:
        return {}


def startup_notes() -> list[str]:
    """What this worker's Inductor start-up was given, for `compile_notes`: the vector-ISA setting and where it
    came from, and the precompiled headers' folder."""
    if ENV_PROBE not in os.environ:
        return []
    from torch._inductor import config

    probe = _worker_probe()
    ok = config.cpp.vec_isa_ok
    if ok is True and os.environ.get(ENV_VEC_ISA_OK) == "1" and _trust_is_equivalent(probe):
        cached = probe.get("cached") or {}
        source = (f"this machine's probe of {cached.get('probed_at')}, kept in {cached.get('file')} under the "
                  f"torch, compiler, CPU flags and Inductor checks of this run (inductor_cpu_cache.py), which took "
                  if cached else "its once-per-run probe in ")
        isa = (f"cpp.vec_isa_ok=True (TORCHINDUCTOR_VEC_ISA_OK=1, set by the harness from {source}"
               f"{probe.get('seconds')} s: Inductor's base check built and loaded for every ISA it "
               f"accepts, {', '.join(probe['trusted'])}; it picks {probe['picked']}; torch {probe.get('torch')}, "
               f"{probe.get('compiler')}); the ISA extension checks ran in this process")
    elif ok is None:
        why = probe.get("error") or f"base checks {probe.get('base_checks')}"
        isa = f"cpp.vec_isa_ok=None: Inductor checked every vector ISA in this process (run's probe: {why})"
    else:
        isa = f"cpp.vec_isa_ok={ok}: set by the environment, not by the harness"
    if "linked_to" in _headers:
        built = _count_headers(_headers["linked_to"]) - _headers["found"]
        where = "this machine's" if _headers.get("same") else f"this machine's ({_headers['linked_to']})"
        pch = (f"precompiled headers: {where} Inductor header folder, outside the cache folders as Inductor keeps "
               f"them; {_headers['found']} found there, {max(built, 0)} built by this process")
    else:
        pch = f"precompiled headers: this process's own temporary folder ({_headers.get('why', 'not shared')})"
    if "answered" in _extensions:
        ext = (f"ISA extension checks: {_extensions['answered']} answered from the run's probe (which built and "
               f"loaded the same programs with the same flags once, {_extensions['probe_s']} s), "
               f"{_extensions['built']} built and loaded by this process")
    else:
        ext = f"ISA extension checks: {_extensions.get('why', 'checked in this process')}"
    return [isa, pch, ext]
