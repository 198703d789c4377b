"""`python -m bakeoff.backends.inductor_cpu_probe`: Inductor's vector-ISA choice on this machine, made as a fresh
worker makes it and again trusting the CPU's flags, printed as one JSON line (read by inductor_cpu.py).

Run with TORCHINDUCTOR_CACHE_DIR set to an empty scratch folder (the probe programs are compiled there). Keys:
torch, compiler, header_dir (Inductor's folder of precompiled headers under this process's temporary folder),
probed (the ISAs `valid_vec_isa_list()` accepts with `config.cpp.vec_isa_ok` unset: each ISA the CPU reports
built and loaded), trusted (the same with `vec_isa_ok = True`), picked / picked_trusted (`pick_vec_isa()` and its
arch flags in each), seconds, and user_vec_isa_ok when the environment already set the option (nothing else
is probed then).
"""
from __future__ import annotations

import json
import time


def _isas() -> tuple[list[str], str]:
    from torch._inductor import cpu_vec_isa

    picked = cpu_vec_isa.pick_vec_isa()
    return [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list()], f"{picked} ({picked.build_arch_flags()})"


def _forget_isa_checks() -> None:
    """Clear Inductor's per-process memo of every ISA check (functools caches on the ISA classes and on the
    list), so that the second pass decides afresh, as a new process would."""
    from torch._inductor import cpu_vec_isa

    cpu_vec_isa.valid_vec_isa_list.cache_clear()
    classes = {klass for isa in cpu_vec_isa.supported_vec_isa_list for klass in type(isa).__mro__}
    for klass in classes:
        for attr in vars(klass).values():
            if callable(getattr(attr, "cache_clear", None)):
                attr.cache_clear()


def probe() -> dict:
    t0 = time.perf_counter()
    import torch
    from torch._inductor import codecache, config
    from torch._inductor.cpp_builder import get_compiler_version_info, get_cpp_compiler

    compiler = get_compiler_version_info(get_cpp_compiler())
    out: dict = {"torch": torch.__version__, "compiler": compiler[compiler.rfind("version") - 4:].strip(" _")[:120],
                 "header_dir": getattr(codecache, "_HEADER_DIR", None)}
    if config.cpp.vec_isa_ok is not None:
        out["user_vec_isa_ok"] = config.cpp.vec_isa_ok
        return out
    config.cpp.vec_isa_ok = True
    out["trusted"], out["picked_trusted"] = _isas()
    _prebuild_checks()
    _forget_isa_checks()
    config.cpp.vec_isa_ok = None
    out["probed"], out["picked"] = _isas()
    out["seconds"] = round(time.perf_counter() - t0, 2)
    return out


def _prebuild_checks() -> None:
    """Compile the check program of every ISA the trusting pass accepted, side by side on the CPU's cores (each
    is one g++ run of a few seconds); the probing pass then finds each built, as Inductor's own check does when
    its output exists, and still loads each in a child process. The probing pass can only accept fewer ISAs."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    from torch._inductor import cpu_vec_isa

    isas = cpu_vec_isa.valid_vec_isa_list()
    with ThreadPoolExecutor(max_workers=max(1, min(len(isas), os.cpu_count() or 1))) as pool:
        list(pool.map(lambda isa: isa.check_build(cpu_vec_isa.VecISA._avx_code), isas))


if __name__ == "__main__":
    print(json.dumps(probe()))
