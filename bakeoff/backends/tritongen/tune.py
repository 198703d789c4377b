"""Stage 3, compile and tune: import the generated source, pick launch configs, compile the winners.

Source is written to `<cache>/src/<kernel>_<sha>.py` and imported, so `triton.jit` sees a real file.
Configs: on the GPU a small search (median `do_bench` time of each candidate on random data); under the
interpreter the one fixed config. Either way the winners are kept in `<cache>/tune.json` under a key of graph
digest, input shapes, dtype, device name, Triton version and the sources' hash, so a warm compile skips the search.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from functools import partial
from pathlib import Path
from typing import Any, Sequence

from bakeoff.backends.tritongen import compile_batch, compile_pool
from bakeoff.backends.tritongen.source import KernelSource
from bakeoff.backends.tritongen.configs import Config, candidates, config_scratch, fixed, launches
from bakeoff.backends.tritongen.kernel_plan import Plan

CACHE_ENV = "BAKEOFF_TRITONGEN_CACHE_DIR"


def cache_dir() -> Path:
    """BAKEOFF_TRITONGEN_CACHE_DIR, else ~/.cache/bakeoff/tritongen (created)."""
    path = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "bakeoff" / "tritongen")
    path.mkdir(parents=True, exist_ok=True)
    return path


def load_kernels(sources: Sequence[KernelSource], folder: Path) -> tuple[Any, ...]:
    """Write each source to a file and import it; returns the modules (holding the `@triton.jit` functions)."""
    out = []
    (folder / "src").mkdir(parents=True, exist_ok=True)
    for src in sources:
        sha = hashlib.sha256(src.text.encode()).hexdigest()[:16]
        name = f"bakeoff_tritongen_{src.fn}_{sha}"
        path = folder / "src" / f"{src.fn}_{sha}.py"
        if not path.exists() or path.read_text() != src.text:
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(src.text)
            os.replace(tmp, path)
        module = sys.modules.get(name)
        if module is None:
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        out.append(module)
    return tuple(out)


def tune_key(plan: Plan, sources: Sequence[KernelSource], dtype: str, device_name: str) -> str:
    import triton

    shapes = ";".join(f"{n.attr('name')}:{'x'.join(map(str, n.shape))}" for n in plan.source.inputs)
    text = hashlib.sha256("".join(s.text for s in sources).encode()).hexdigest()[:16]
    return f"{plan.source.digest()}|{shapes}|{dtype}|{device_name}|triton-{triton.__version__}|src-{text}"


def _read(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _write(path: Path, key: str, value: list[Config]) -> None:
    data = _read(path)
    data[key] = value
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)


def needs_allocator(sources: Sequence[KernelSource], configs: Sequence[Config] = ()) -> bool:
    """Whether a kernel may build TMA descriptors on the device, whose scratch Triton takes from the allocator
    `set_tma_allocator` sets: the TMA variants and the pre-split float32 twins (matmul's and attention's, whose
    configs say SPLIT and not always TMA). Asked by the search and by the winners' compile alike, so a compile
    whose configs come from the cache file (a warm compile: no search) sets it too."""
    return any(s.variant == "tma" or s.split for s in sources) or any(c.get("TMA") or c.get("SPLIT") for c in configs)


def set_tma_allocator(device: str) -> None:
    """Device-side TMA descriptors need scratch memory: take it from torch's caching allocator on `device`."""
    import torch
    import triton

    def alloc(size: int, alignment: int, stream: Any) -> Any:
        return torch.empty(size, device=device, dtype=torch.int8)

    triton.set_allocator(alloc)


def launch(module: Any, src: KernelSource, cfg: Config, tensors: dict[str, Any]) -> Any:
    """The launches of `src` under `cfg` on named buffers (a pre-split config: its split launches, then the
    matmul); returns the last one's compiled kernel (None interpreted)."""
    out = None
    for fn, grid, params, kwargs in launches(src, cfg):
        out = getattr(module, fn)[grid](*[tensors[p] for p in params], **kwargs)
    return out


def _search(plan: Plan, sources: Sequence[KernelSource], modules: Sequence[Any], dtype: str,
            device: str, wide: bool = False) -> tuple[list[Config], list[str]]:
    """Time every candidate of every kernel on random buffers; the fastest per kernel, and notes on failures.

    Every kernel's candidates are compiled first, in one batch (`compile_batch.py`: host work, Triton's compiler
    and its launcher stubs), then timed kernel by kernel inside `device_work(alone=True)`, the only part of the
    search that runs on the device (with the random buffers' creation): beside other cases' timing, the
    harness's gate holds only that part (Backend.marks_device_work), and the timing has the device alone."""
    import torch

    from bakeoff.backends.base import device_work
    from bakeoff.workloads.lower_torch import TORCH_DTYPES

    if needs_allocator(sources):
        set_tma_allocator(device)
    groups = search_groups(sources, dtype, device, wide)
    with device_work():
        gen = torch.Generator(device=device)
        gen.manual_seed(0)
        tensors = {b.name: torch.randn(b.shape, generator=gen, device=device, dtype=torch.float32)
                   .to(TORCH_DTYPES[b.dtype]) for b in plan.buffers}
        tensors.update({name: torch.empty(shape, device=device, dtype=torch.float32)  # configs' own scratch
                        for name, shape in group_scratch(groups, sources)})
    notes: list[str] = []
    unbuilt = compile_groups(groups, sources, modules, tensors, notes)
    chosen: list[Config] = [{}] * len(sources)
    for (members, cfgs, rest), errors in zip(groups, unbuilt):
        src, module = sources[members[0]], modules[members[0]]
        try:
            best = _search_kernel(src, module, cfgs, tensors, device, notes, errors)
        except RuntimeError:
            if not rest:
                raise
            notes.append(f"{src.fn}: no pruned candidate ran; the rest of the list searched")
            with device_work():
                tensors.update({n: torch.empty(s, device=device, dtype=torch.float32)
                                for c in rest for n, s in config_scratch(src, c)})
            best = _search_kernel(src, module, rest, tensors, device, notes)
        for i in members:
            chosen[i] = best
    del tensors
    return chosen, notes


def search_groups(sources: Sequence[KernelSource], dtype: str, device: str, wide: bool, sms: int | None = None
                  ) -> list[tuple[list[int], list[Config], list[Config]]]:
    """(kernels, candidates, the rest of the list) per search: kernels of the same kind, twin and sizes (the Q, K,
    V and output projections) are searched once, on the first; `rest` (pruned search only) is searched where
    none of the candidates compiles and runs."""
    first: dict[tuple, list[int]] = {}
    for i, src in enumerate(sources):
        first.setdefault((src.kernel.kind, src.variant, tuple(sorted(src.sizes.items()))), []).append(i)
    out = []
    for members in first.values():
        every = list(candidates(sources[members[0]], dtype, device, sms, wide=True))
        cfgs = every if wide else list(candidates(sources[members[0]], dtype, device, sms, wide=False))
        out.append((members, cfgs, every[len(cfgs):]))
    return out


def group_scratch(groups: Sequence[tuple], sources: Sequence[KernelSource]) -> list[tuple[str, tuple[int, ...]]]:
    """The scratch buffers (operand planes, split-K partials) of every compile the search asks for."""
    return [b for _, i, c in compile_jobs_of(groups, sources) for b in config_scratch(sources[i], c)]


def compile_jobs_of(groups: Sequence[tuple], sources: Sequence[KernelSource]) -> list[tuple[int, int, Config]]:
    """(group, kernel, config) of each compile the search asks for: every candidate of a group's first kernel,
    and each other member whose source differs (a projection with another epilogue) under the first candidate,
    which the orders put first because it won on the H200: compiled beside the others rather than alone after
    the search (`compile_winners`, which then finds it compiled unless another candidate won)."""
    jobs = []
    for g, (members, cfgs, _) in enumerate(groups):
        jobs += [(g, members[0], c) for c in cfgs]
        seen = {sources[members[0]].text}
        for i in members[1:]:
            if sources[i].text not in seen:
                seen.add(sources[i].text)
                jobs.append((g, i, cfgs[0]))
    return jobs


def compile_groups(groups: Sequence[tuple], sources: Sequence[KernelSource], modules: Sequence[Any],
                   tensors: dict[str, Any], notes: list[str]) -> list[list[str]]:
    """Compile the search's candidates (`compile_jobs_of`); per group, its candidates' errors in words. In one
    batch of COMPILE_THREADS threads (compile_batch.py), or, where BAKEOFF_TRITONGEN_COMPILE_WORKERS asks for
    them, group by group in worker processes (precompile_all)."""
    if compile_pool.pool_size() > 0:
        return [precompile_all(modules[m[0]], sources[m[0]], cfgs, tensors, notes) for m, cfgs, _ in groups]
    jobs = compile_jobs_of(groups, sources)
    said = compile_batch.compile_jobs([partial(precompile_each, modules[i], sources[i], c, tensors)
                                       for _, i, c in jobs], COMPILE_THREADS)
    note = "config search: candidates of every kernel compiled in one batch of threads, launcher stubs included"
    if note not in notes:
        notes.append(note)
    out: list[list[str]] = [[] for _ in groups]
    for (g, i, _), err in zip(jobs, said):
        if err is not None and i == groups[g][0][0]:
            out[g].append(err)
    return out


def _search_kernel(src: KernelSource, module: Any, cfgs: list[Config], tensors: dict[str, Any], device: str,
                   notes: list[str], unbuilt: list[str] | None = None) -> Config:
    """The fastest of `cfgs` for one kernel: each compiled first (host work; `unbuilt`: the errors of a compile
    done already, else precompile_all compiles them), then all timed with the device alone
    (`device_work(alone=True)`), SEARCH_ROUNDS interleaved rounds, each judged by its fastest; failures and times
    go to `notes`. One candidate is compiled, checked to load (`loads`) and not timed."""
    import torch
    from triton.testing import do_bench

    from bakeoff.backends.base import device_work

    if unbuilt is None:
        with device_work():  # the configs' own scratch (split-K partials, operand planes)
            for cfg in cfgs:
                tensors.update({name: torch.empty(shape, device=device, dtype=torch.float32)
                                for name, shape in config_scratch(src, cfg)})
        unbuilt = precompile_all(module, src, cfgs, tensors, notes)
    if unbuilt:
        notes.append(f"{src.fn}: {len(unbuilt)} of {len(cfgs)} candidates compiled only at their first launch, "
                     f"in the timed part (first: {unbuilt[0]})")
    elif len(cfgs) == 1:  # nothing to choose between: compiled, not timed (a failed compile is timed, and fails)
        failed = loads(module, src, cfgs[0], tensors)
        if failed is None:
            notes.append(f"{src.fn}: one candidate, compiled and not timed")
            return cfgs[0]
        notes.append(f"{src.fn}: config {cfgs[0]} failed: {failed}")
        raise RuntimeError(f"tritongen: no config of {src.fn} compiled ({failed})")
    rounds: dict[int, list[float]] = {i: [] for i in range(len(cfgs))}  # the candidates still in the search
    with device_work(alone=True):
        for _ in range(SEARCH_ROUNDS):
            for i in list(rounds):
                try:
                    rounds[i].append(_median_ms(do_bench, lambda: launch(module, src, cfgs[i], tensors),
                                                rounds[i][-1] if rounds[i] else None))
                except Exception as exc:  # e.g. out of shared memory: out of the search, and said so
                    notes.append(_failed(src, cfgs[i], exc))
                    del rounds[i]
    best, best_ms = None, float("inf")
    for i, got in rounds.items():
        cfg = cfgs[i]
        tried = ",".join(f"{k}={v}" for k, v in cfg.items() if k != "NUM_SMS")
        notes.append(f"tune {src.fn} {tried}: {min(got):.4f} ms (rounds {'/'.join(f'{x:.4f}' for x in got)})")
        if min(got) < best_ms:
            best, best_ms = cfg, min(got)
    if best is None:
        raise RuntimeError(f"tritongen: no config of {src.fn} compiled ({notes[-1] if notes else ''})")
    return best


def loads(module: Any, src: KernelSource, cfg: Config, tensors: dict[str, Any]) -> str | None:
    """None when every kernel of `cfg` (compiled already: Triton's JIT cache answers) loads on the device, else
    why not in words (Triton's checks at load: shared memory, threads), as its first launch would raise it."""
    try:
        for kernel in precompile_each(module, src, cfg, tensors):
            getattr(kernel, "run", None)  # CompiledKernel.run loads the module and checks its resources
    except Exception as exc:  # noqa: BLE001 - said in the notes; the search falls back to the rest of the list
        return f"{type(exc).__name__}: {str(exc)[:120]}"
    return None


SEARCH_REP_MS, SEARCH_MIN_RUNS = 20, 5
# Each candidate is timed in SEARCH_ROUNDS interleaved rounds and judged by its fastest round. Under bakeoff
# --jobs N the rounds have the device alone (device_work(alone=True)); while they shared it with other cases'
# device work (inputs, references, other searches), a round could run 2-3x slow: the H200 run that showed it
# picked the template over the Gluon attention kernel (2.62 against 1.99 ms when timed alone), and in an H100
# run a 16-bit GEMM candidate's rounds differed by up to 2.5x. Rounds still guard against what the gate does
# not hold off (a process outside the run, the clock). Every candidate stays for every round: dropping those over
# 1.5x the fastest after the first round lost the Gluon kernel again on the H200 (4.68 ms in a disturbed first
# round against the template's 2.26; it runs 2.03 ms alone).
SEARCH_ROUNDS = 3


def _median_ms(do_bench: Any, fn: Any, hint_ms: float | None = None) -> float:
    """Median ms of `fn` over at least SEARCH_MIN_RUNS timed runs: do_bench fits its repeats into `rep` ms, so a
    kernel longer than rep / SEARCH_MIN_RUNS is timed again with a longer window (a 25 ms matmul otherwise gets
    one sample). `hint_ms` (the candidate's time in an earlier round) picks that window at once: the same
    measurement without the first call, whose eight runs of a long kernel only estimated its time."""
    if hint_ms is not None and hint_ms * SEARCH_MIN_RUNS > SEARCH_REP_MS:
        return do_bench(fn, warmup=0, rep=int(hint_ms * SEARCH_MIN_RUNS) + 1, return_mode="median")
    ms = do_bench(fn, warmup=5, rep=SEARCH_REP_MS, return_mode="median")
    if ms * SEARCH_MIN_RUNS > SEARCH_REP_MS:
        ms = do_bench(fn, warmup=0, rep=int(ms * SEARCH_MIN_RUNS) + 1, return_mode="median")
    return ms


def _failed(src: KernelSource, cfg: Config, exc: Exception) -> str:
    return f"{src.fn}: config {cfg} failed: {type(exc).__name__}: {str(exc)[:120]}"


def precompile_all(module: Any, src: KernelSource, cfgs: Sequence[Config], tensors: dict[str, Any],
                   notes: list[str] | None = None) -> list[str]:
    """Compile every candidate of `src` without launching it; the errors, in words. In worker processes
    (compile_pool.py: side by side, each on its own core) where they can start, else COMPILE_THREADS threads at
    once (Triton's AsyncCompileMode: threads share the GIL, so they overlap only partly); `notes` gets which,
    once. A candidate that failed here is compiled again at its first launch, which decides."""
    calls = [partial(precompile, module, src, cfg, tensors) for cfg in cfgs]
    try:
        errors, rest = compile_pool.build(calls)
        note = f"config search: candidates compiled in {compile_pool.pool_size()} worker processes"
    except compile_pool.PoolUnavailable as exc:
        errors, rest = [], list(range(len(calls)))
        note = f"config search: candidates compiled in threads, not worker processes: {exc}"
    threads = [partial(precompile_each, module, src, cfgs[i], tensors) for i in rest]
    errors += [e for e in compile_batch.compile_jobs(threads, COMPILE_THREADS) if e is not None]
    if notes is not None and note not in notes:
        notes.append(note)
    return errors


# Where the compile pool cannot start, candidates compile in this many threads at once: the harness runs
# several cases side by side (--jobs), each with its own search.
COMPILE_THREADS = 4


def precompile(module: Any, src: KernelSource, cfg: Config, tensors: dict[str, Any]) -> Any:
    """Compile `src`'s launches under `cfg` for the buffers `tensors` without launching them (Triton's warmup,
    with the same arguments as `launch`, so the launches that follow find them in Triton's cache); returns the
    last one's CompiledKernel."""
    return precompile_each(module, src, cfg, tensors)[-1]


def precompile_each(module: Any, src: KernelSource, cfg: Config, tensors: dict[str, Any]) -> list[Any]:
    """`precompile`, returning what each launch's warmup returned (under AsyncCompileMode: Triton's futures)."""
    return [getattr(module, fn).warmup(*[tensors[p] for p in params], grid=grid, **kwargs)
            for fn, grid, params, kwargs in launches(src, cfg)]


def choose_configs(plan: Plan, sources: Sequence[KernelSource], modules: Sequence[Any], dtype: str,
                   device: str, device_name: str, search: bool, wide: bool = False
                   ) -> tuple[list[Config], bool, list[str]]:
    """Configs per kernel, whether they came from the cache file, and notes. `search` False: fixed configs;
    `wide`: search the whole candidate space instead of the pruned one."""
    path = cache_dir() / "tune.json"
    key = tune_key(plan, sources, dtype, device_name) + ("|fixed" if not search else "|wide" if wide else "")
    cached = _read(path).get(key)
    if isinstance(cached, list) and len(cached) == len(sources):
        return cached, True, []
    if search:
        chosen, notes = _search(plan, sources, modules, dtype, device, wide)
    else:
        chosen, notes = [fixed(s) for s in sources], []
    _write(path, key, chosen)
    return chosen, False, notes


def compile_winners(plan: Plan, sources: Sequence[KernelSource], modules: Sequence[Any],
                    configs: Sequence[Config], device: str = "cuda") -> list[Any]:
    """Compile each kernel under its config without launching (GPU); Triton's CompiledKernel per kernel."""
    from bakeoff.workloads.lower_torch import TORCH_DTYPES

    if needs_allocator(sources, configs):
        set_tma_allocator(device)
    out = []
    for src, module, cfg in zip(sources, modules, configs):
        dtypes = {p: TORCH_DTYPES[plan.buffer(p).dtype] for p in src.params}
        dtypes.update({name: TORCH_DTYPES["float32"] for name, _ in config_scratch(src, cfg)})
        out.append(precompile(module, src, cfg, dtypes))
    return out
