"""`python -m bakeoff.backends.inductor_cpu_probe`: whether Inductor may trust this CPU's flags for its vector ISAs,
decided by Inductor's own checks, printed as one JSON line (read by inductor_cpu.py).

What `config.cpp.vec_isa_ok` changes (torch/_inductor/cpu_vec_isa.py, read in torch 2.13; an older stored
version has the same `__bool__impl`; in a torch without these names the probe fails and workers check): an
ISA's `__bool__` runs `check_build(VecISA._avx_code)` (the "base check": a program using ATen's vectorized
math, compiled with the ISA's flags and loaded in a child process) unless `vec_isa_ok` is set, when it returns
that value instead. Everything else runs either way: which ISAs the CPU's flags report, and each ISA's
extension checks after its base check (AVX-512 BF16, VNNI, AMX tiles and AMX FP16: small programs that also
decide the arch flags). So with `vec_isa_ok = True` Inductor picks what it picks by checking if and only if
the base check of every ISA it accepts when trusting passes. This module makes that pass (`trusted`, the
accepted ISAs, and `picked`, `pick_vec_isa()` with its arch flags), then runs the base check of each accepted
ISA side by side on the CPU's cores, on copies taken before the pass (so with the arch flags a checking
worker's base check uses): `base_checks`, ISA -> passed.

The pass itself runs the extension checks a trusting worker runs, in the same order with the same flags:
`extension_checks` lists each (the ISA, the arch flags it was built with, the program's SHA-256, passed,
seconds), so a trusting worker of this run can take their answers instead of building and loading the same
programs again (inductor_cpu.answer_extension_checks).

Run with TORCHINDUCTOR_CACHE_DIR set to an empty scratch folder (the checks are compiled there). Also printed:
torch, compiler, header_dir (Inductor's folder of precompiled headers under this process's temporary
folder), seconds; user_vec_isa_ok instead when the environment already set the option (nothing is checked).
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor


def probe() -> dict:
    t0 = time.perf_counter()
    import torch
    from torch._inductor import codecache, config, cpu_vec_isa
    from torch._inductor.cpp_builder import get_compiler_version_info, get_cpp_compiler

    compiler = get_compiler_version_info(get_cpp_compiler())
    out: dict = {"torch": torch.__version__, "compiler": compiler[compiler.rfind("version") - 4:].strip(" _")[:120],
                 "header_dir": getattr(codecache, "_HEADER_DIR", None)}
    if config.cpp.vec_isa_ok is not None:
        out["user_vec_isa_ok"] = config.cpp.vec_isa_ok
        return out
    pristine = [copy.copy(isa) for isa in cpu_vec_isa.supported_vec_isa_list]  # before any check sets a flag
    config.cpp.vec_isa_ok = True
    with _recording(cpu_vec_isa.VecISA) as extension_checks:
        accepted = cpu_vec_isa.valid_vec_isa_list()
        picked = cpu_vec_isa.pick_vec_isa()
    out["extension_checks"] = extension_checks
    out["trusted"] = [str(isa) for isa in accepted]
    out["picked"] = f"{picked} ({picked.build_arch_flags()})"
    checks = [_pristine(isa, pristine, cpu_vec_isa.supported_vec_isa_list) for isa in accepted]
    with ThreadPoolExecutor(max_workers=max(1, min(len(checks), os.cpu_count() or 1))) as pool:
        passed = list(pool.map(lambda isa: isa.check_build(cpu_vec_isa.VecISA._avx_code), checks))
    out["base_checks"] = {str(isa): ok for isa, ok in zip(checks, passed)}
    out["seconds"] = round(time.perf_counter() - t0, 2)
    return out


def check_key(isa, code: str) -> dict:
    """What identifies one check_build call: the ISA, the arch flags it builds with now, the program."""
    return {"isa": str(isa), "flags": isa.build_arch_flags(), "code_sha256": hashlib.sha256(code.encode()).hexdigest()}


class _recording:
    """Record every `VecISA.check_build` call made inside the block (key, result, seconds)."""

    def __init__(self, cls) -> None:
        self.cls, self.calls = cls, []

    def __enter__(self) -> list:
        original, calls = self.cls.check_build, self.calls

        def check_build(isa, code: str) -> bool:
            key, t0 = check_key(isa, code), time.perf_counter()
            passed = original(isa, code)
            calls.append({**key, "passed": bool(passed), "seconds": round(time.perf_counter() - t0, 3)})
            return passed

        self.original = original
        self.cls.check_build = check_build
        return calls

    def __exit__(self, *exc) -> None:
        self.cls.check_build = self.original


def _pristine(isa, pristine: list, originals: list):
    """The copy of `isa` taken before the pass; a copy of `isa` itself where the list made it anew (aarch64
    and other non-x86 machines, whose ISAs have no extension check that changes their flags)."""
    for before, original in zip(pristine, originals):
        if original is isa:
            return before
    return copy.copy(isa)


if __name__ == "__main__":
    print(json.dumps(probe()))
