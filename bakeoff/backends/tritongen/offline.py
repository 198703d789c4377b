"""Compile a workload's GPU kernels for a CUDA target without a GPU, and report what the compiler made of them.

Triton compiles to PTX and cubin for any `GPUTarget` with no device present; its bundled `cuobjdump` gives the
SASS. Per kernel and candidate config this prints registers, spills, shared memory, SASS instruction count,
matrix instructions (HGMMA = Hopper wgmma, HMMA = mma.sync) and, for row and pointwise kernels, SASS
instructions per element of work (the issue-rate budget of a memory-bound kernel). It costs no device time,
so it is the first look at a kernel change before any GPU run.

    python -m bakeoff.backends.tritongen.offline layernorm_gelu --dtype bfloat16 [--preset gpu] [--sass]

To match the GPU's compiler, put that Triton first on sys.path (e.g. PYTHONPATH=/path/to/triton-3.6:$PWD).
"""
from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

_PTR = {"float32": "*fp32", "float16": "*fp16", "bfloat16": "*bf16"}


def compile_offline(module: Any, src: Any, cfg: dict, plan: Any, arch: int = 90, launch: int = -1) -> Any:
    """Triton's CompiledKernel of `src`'s launch number `launch` under `cfg` (the last: the kernel itself, or a
    split-K config's epilogue kernel) for sm_`arch`, pointer arguments 16-byte aligned (as torch's allocations
    are, which is what the JIT specialises on at launch)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from bakeoff.backends.tritongen.configs import config_scratch, launches

    name, _, params, kwargs = launches(src, cfg)[launch]
    consts = {k: v for k, v in kwargs.items() if k not in ("num_warps", "num_stages")}
    planes = {name: "*fp32" for name, _ in config_scratch(src, cfg)}
    sig = {p: planes.get(p) or _PTR[plan.buffer(p).dtype] for p in params} | {k: "constexpr" for k in consts}
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(len(params))}
    ast = ASTSource(getattr(module, name), sig, constexprs=consts, attrs=attrs)
    opts = {"num_warps": kwargs["num_warps"], "num_stages": kwargs["num_stages"]}
    return triton.compile(ast, target=GPUTarget("cuda", arch, 32), options=opts)


def cuobjdump(cubin: bytes, flag: str) -> str:
    """`cuobjdump <flag>` of a cubin (--dump-sass, --dump-resource-usage), with the cuobjdump Triton ships."""
    import triton

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([str(tool), flag, f.name], capture_output=True, text=True, check=True).stdout


def registers(cubin: bytes) -> tuple[int | None, int | None]:
    """(registers per thread, stack frame bytes) from the cubin's resource usage."""
    usage = cuobjdump(cubin, "--dump-resource-usage")
    reg, stack = re.search(r"REG:(\d+)", usage), re.search(r"STACK:(\d+)", usage)
    return (int(reg.group(1)) if reg else None), (int(stack.group(1)) if stack else None)


def sass_mix(sass: str) -> Counter:
    """Opcode counts (static, one per instruction in the listing) of a SASS dump."""
    ops: Counter = Counter()
    for line in sass.splitlines():
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", line)
        if m and m.group(1) != "NOP":
            ops[m.group(1)] += 1
    return ops


def elements_per_program(src: Any, cfg: dict) -> int | None:
    """Output elements one program (one loop step for row-looping programs) handles: the per-element budget."""
    if src.kernel.kind in ("pointwise", "copy"):
        return cfg["BLOCK"]
    if src.kernel.kind == "rowreduce" and src.variant != "looped":
        return cfg["BLOCK_M"] * src.sizes["cols"]
    return None


def _gluon_offline(launch: Any, dtype: str, arch: int) -> Any:
    """The Gluon attention twin's CompiledKernel for the case's sequence and head layout (its module's Launch)."""
    from bakeoff.backends.tritongen.gluon_attention import compile_offline as gluon_compile

    c = launch.consts
    return gluon_compile(dtype, seq=launch.seq, arch=arch, rows=(c["HEADS"], c["SB"], c["SH"], c["SS"]))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workload")
    ap.add_argument("--dtype", default="bfloat16", choices=sorted(_PTR))
    ap.add_argument("--preset", default="gpu")
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--sms", type=int, default=132, help="multiprocessors assumed for persistent grids")
    ap.add_argument("--options", default="{}", help="tritongen options as JSON (fp32_dot, matmul_tma, ...)")
    ap.add_argument("--sass", action="store_true", help="print each kernel's SASS")
    ap.add_argument("--kernel", default=None, help="only kernels whose name contains this")
    args = ap.parse_args(argv)
    import json

    from bakeoff.backends.tritongen import TritonGenBackend, target_from_options
    from bakeoff.backends.tritongen.codegen import generate_all
    from bakeoff.backends.tritongen.configs import candidates
    from bakeoff.backends.tritongen.fusion import fuse
    from bakeoff.backends.tritongen.tune import cache_dir, load_kernels
    from bakeoff.workloads.ir import bind
    from bakeoff.workloads.suite import builtin_workloads
    from bakeoff.workloads.traps import numerics_workloads

    w = {**builtin_workloads(), **numerics_workloads()}[args.workload]
    graph = bind(w.graph, w.presets[args.preset], args.dtype)
    plan = fuse(graph)
    target = target_from_options(TritonGenBackend.parse_options(json.loads(args.options)), False, args.dtype,
                                 args.arch)  # the arch decides the Hopper-only twins (Gluon attention)
    sources = generate_all(plan, target)
    modules = load_kernels(sources, cache_dir())
    for src, mod in zip(sources, modules):
        if args.kernel and args.kernel not in src.fn:
            continue
        for cfg in candidates(src, args.dtype, sms=args.sms):
            shown = ",".join(f"{k}={v}" for k, v in cfg.items() if k != "NUM_SMS")
            for launch in ((0, 1) if cfg.get("SPLIT_K") else (-1,)):  # split-K: the partials, then the epilogue
                _report(mod, src, cfg, plan, args, launch, shown + (",_ske" if launch == 1 else ""))


def _report(mod: Any, src: Any, cfg: dict, plan: Any, args: Any, launch: int, shown: str) -> None:
    """One line of main's report: the launch's registers, shared memory and SASS mix (or why it failed)."""
    try:
        ck = compile_offline(mod, src, cfg, plan, args.arch, launch) if not cfg.get("GLUON") else \
            _gluon_offline(getattr(mod, src.fn + "_gl"), args.dtype, args.arch)
    except Exception as exc:  # noqa: BLE001 - a candidate that does not compile is a line of the report
        print(f"{src.fn:14} {shown:70} FAILED {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
        return
    sass = cuobjdump(ck.asm["cubin"], "--dump-sass")
    regs, stack = registers(ck.asm["cubin"])
    mix = sass_mix(sass)
    total = sum(mix.values())
    per = elements_per_program(src, cfg)
    threads = cfg["num_warps"] * 32
    per_elem = f" {total * threads / per:5.1f} instr/elem" if per else ""
    print(f"{src.fn:14} {shown:70} regs={regs} stack={stack} "
          f"smem={ck.metadata.shared} sass={total}{per_elem} HGMMA={mix['HGMMA']} HMMA={mix['HMMA']} "
          f"LDL/STL={mix['LDL'] + mix['STL']} MUFU={mix['MUFU']}", flush=True)
    if args.sass:
        print(sass)


if __name__ == "__main__":
    main()
