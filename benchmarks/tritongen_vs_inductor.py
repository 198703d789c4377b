"""tritongen against Inductor (torch.compile default) and eager on the GPU, in bf16, fp16 and fp32, `gpu` presets.

For each workload and dtype: compile tritongen (cold, then warm from its caches) and Inductor (cold), check
tritongen's output against eager (relative L2, two input seeds, so stale memory cannot pass) and against a
float64 reference (eager's graph in float64 on the GPU, on a slice of the batch/row dim: rows are independent),
next to eager's own error against that reference (err ratio = ours / eager's); time all three (and tritongen
replayed from a CUDA graph) with `triton.testing.do_bench` (median, ms) in BENCH_ROUNDS interleaved rounds, the
median of each one's rounds (a GEMM's torch.mm and attention's F.sdpa ceiling timed in those rounds too); grade
against ceilings measured in the same run: a 1 GiB
device-to-device copy (bytes read + written; beside it a copy of each memory-bound case's own bytes), torch.mm
8192^3 and F.scaled_dot_product_attention (causal, 8x32x4096x128, default backend) in each dtype, eager's settings
(no TF32 for float32).

    PYTHONUNBUFFERED=1 python benchmarks/tritongen_vs_inductor.py [--dtypes bfloat16 float32] [--workloads a b]
        [--options '{"search": "wide"}'] [--wide-dtypes bfloat16] [--budget-s 240] [--paired DB_URL ...]

Prints one table (targets beside, misses marked), writes JSON to $OUT/tritongen_vs_inductor<tag>.json.
`--paired DB_URL ...`: also print bakeoff's own paired speedups (each backend timed interleaved with eager in its
case) from the newest run in each store, as one table, e.g. one of `bakeoff run configs/h200.yaml --backend eager
--backend inductor --backend tritongen` in the same dtypes (a suite run as several runs, one store each, reads as
one): tritongen and Inductor over eager, and their ratio.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from triton.testing import do_bench  # noqa: E402

from bakeoff.backends import get_backend  # noqa: E402
from bakeoff.backends.base import TensorSpec  # noqa: E402
from bakeoff.harness.worker.input_tensors import make_inputs  # noqa: E402
from bakeoff.workloads.costs import flops, min_bytes  # noqa: E402
from bakeoff.results.report.data import headline_ms  # noqa: E402
from bakeoff.results.report.headline_facts import (EAGER_APART_REL, eager_moved_between,  # noqa: E402
                                                   speedup_quality)
from bakeoff.workloads.ir import bind  # noqa: E402
from bakeoff.workloads.lower_torch import TORCH_DTYPES, lower_torch  # noqa: E402
from bakeoff.workloads.suite import builtin_workloads  # noqa: E402
from benchmarks.noise_share import spread  # noqa: E402  (max / min - 1 over two or more values, else None)

DTYPES = ("bfloat16", "float16", "float32")
SHORT = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
# targets: fraction of copy bandwidth per memory-bound workload; GEMM vs torch.mm; attention vs F.sdpa; blocks vs
# Inductor; everywhere at least as fast as Inductor and eager; float32 err ratio <= 2
COPY_TARGET = {"layernorm_gelu": 0.90, "rmsnorm": 0.92, "softmax": 0.92, "softmax_large": 0.92}
ELEMENTWISE_TARGET, GEMM_TARGET, ATTN_TARGET, BLOCK_TARGET = 0.95, 1.0, 1.0, 1.15
GEOMEAN_TARGET, ERR_RATIO_MAX = 1.3, 2.0
SLICE = {"B": 1, "M": 256}  # fp64 reference on this many batch entries / rows


# Each of a case's timed calls (tritongen, Inductor, eager, tritongen's CUDA graph) is timed in BENCH_ROUNDS rounds,
# one do_bench each a round, the order reversed every other round; its figure is the median of its rounds. Timed
# one after the other instead, a power-capped GPU settling through the case gave the first a clock the last did
# not have: on an H100, 16-bit mlp_block read 0.95-0.98x Inductor that way, 1.04-1.05x in bakeoff's interleaved
# pairs of the same day.
BENCH_ROUNDS = 5
# A speedup over Inductor whose per-round ratios (Inductor's round over tritongen's same round: the two are timed
# next to each other) spread more than this (max / min - 1) is marked "~" in the table: on a power-capped H100 a
# 16-bit tensor-core case's rounds moved 10-20% while a memory-bound one's held within 1%.
ROUND_SPREAD_MARK = 0.05


def interleaved_ms(calls: dict, rep_ms: int, rounds: int = BENCH_ROUNDS, bench=None) -> tuple[dict, dict]:
    """Per name in `calls`: the median over `rounds` rounds of bench(call, rep_ms) (do_bench's median, ms), the
    calls in their order in even rounds and reversed in odd ones (ABC CBA ABC ...), so that a clock drifting
    through the case weighs on each alike; returns (the medians, every round's figures)."""
    bench = bench or bench_ms
    names = list(calls)
    got: dict = {name: [] for name in names}
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            got[name].append(bench(calls[name], rep_ms))
    return {name: statistics.median(v) for name, v in got.items()}, got


def bench_ms(fn, rep_ms: int) -> float:
    """Median milliseconds of `fn` (CUDA events, after warm-up)."""
    return float(do_bench(fn, warmup=25, rep=rep_ms, return_mode="median"))


def rel_l2(got: torch.Tensor, want: torch.Tensor) -> float:
    g, w = got.double(), want.double()
    return float((g - w).norm() / w.norm())


MM_FLOPS = 2 * 8192**3  # the torch.mm ceiling's


def ceilings(rep_ms: int, dtypes) -> dict:
    """Copy bandwidth (TB/s), and per dtype torch.mm 8192^3 TFLOP/s and causal F.sdpa ms, measured now."""
    out: dict = {"mm_tflop_s": {}, "sdpa_ms": {}}
    src = torch.randn(512 * 1024 * 1024, device="cuda", dtype=torch.bfloat16)  # 1 GiB
    dst = torch.empty_like(src)
    ms = bench_ms(lambda: dst.copy_(src), rep_ms)
    out["copy_ms"], out["copy_tb_s"] = ms, 2 * src.numel() * 2 / ms / 1e9
    del src, dst
    for dt in dtypes:
        out["mm_tflop_s"][dt] = MM_FLOPS / bench_ms(ceiling_calls("gemm", dt)["mm"], rep_ms) / 1e9
        out["sdpa_ms"][dt] = bench_ms(ceiling_calls("attention", dt)["sdpa"], rep_ms)
    torch.cuda.empty_cache()
    return out


def ceiling_calls(category: str, dtype: str) -> dict:
    """The ceiling a GEMM or attention case is graded against, as a call (holding its own inputs) to time at the
    run's start and in the case's own rounds (a power-capped GPU's clock differs from the start of the run to the
    case): torch.mm 8192^3 (`mm`) or causal F.sdpa 8x32x4096x128 (`sdpa`) in the case's dtype; none for other
    categories."""
    if category == "gemm":
        a, b = (torch.randn(8192, 8192, device="cuda", dtype=TORCH_DTYPES[dtype]) for _ in range(2))
        return {"mm": lambda: torch.mm(a, b)}
    if category == "attention":
        q, k, v = (torch.randn(8, 32, 4096, 128, device="cuda", dtype=TORCH_DTYPES[dtype]) for _ in range(3))
        return {"sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)}
    return {}


def same_size_copy_tb_s(nbytes: int, ceil: dict) -> float:
    """A device-to-device copy moving the workload's own bytes (half read, half written), TB/s, measured once
    per size and kept in `ceil["same_size_copy_tb_s"]`: at a few hundred MiB the launch and the tail weigh more
    than in the 1 GiB copy, so this is the ceiling a kernel of that size can reach; the grade stays on 1 GiB."""
    kept = ceil.setdefault("same_size_copy_tb_s", {})
    if nbytes not in kept:
        src = torch.empty(max(1, nbytes // 2), device="cuda", dtype=torch.uint8)
        dst = torch.empty_like(src)
        kept[nbytes] = 2 * src.numel() / bench_ms(lambda: dst.copy_(src), 50) / 1e9
        del src, dst
    return kept[nbytes]


def graph_of(compiled, prepared):
    """tritongen's run captured in a CUDA graph (to replay), or None when capture fails."""
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            compiled.run(prepared)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            compiled.run(prepared)
        return g
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        return None


def fp64_errors(w, preset: dict, dtype: str, xs, outs: dict) -> dict:
    """Each output's rel L2 against eager's graph run in float64 on the GPU, on the first SLICE[dim] entries of
    the leading dim (batch or rows: independent), for every output in `outs` (name -> tensors)."""
    sym = str(w.graph.inputs[0].shape[0])
    n = min(SLICE.get(sym, 256), int(preset[sym]))
    small = bind(w.graph, {**preset, sym: n}, "float64")
    sliced = [x[:n] if str(node.shape[0]) == sym else x for x, node in zip(xs, w.graph.inputs)]
    ref = lower_torch(small)(*[x.double() for x in sliced])
    return {name: max(rel_l2(o[:n], r) for o, r in zip(got, ref)) for name, got in outs.items()}


def round_ratios(rounds: dict, over: str, of: str = "tritongen") -> list[float]:
    """`over`'s figure over `of`'s, round by round (a speedup of `of` over `over` in each round)."""
    return [a / b for a, b in zip(rounds.get(over, []), rounds.get(of, []))]


def grade(w, graph, dtype: str, rec: dict, ceil: dict) -> dict:
    """Achieved rate, fraction of its ceiling and the issue's target for it, and whether every target is met."""
    ms = rec["tritongen_ms"]
    nbytes, nflops = min_bytes(graph), flops(graph)
    out = {"bytes": nbytes, "flops": nflops, "vs_inductor": rec["inductor_ms"] / ms, "vs_eager": rec["eager_ms"] / ms}
    per_round = round_ratios(rec.get("rounds_ms") or {}, "inductor")
    out["vs_inductor_rounds"] = per_round
    out["vs_inductor_round_spread"] = spread(per_round)
    if w.category in ("elementwise", "reduction"):
        rate = nbytes / ms / 1e9
        same = same_size_copy_tb_s(nbytes, ceil)
        out.update(rate=f"{rate:.2f} TB/s", pct=rate / ceil["copy_tb_s"], ceiling="copy",
                   target=COPY_TARGET.get(w.name, ELEMENTWISE_TARGET), of_same_size_copy=rate / same)
    elif w.category == "gemm":  # against torch.mm timed in the case's rounds, else at the run's start
        rate = nflops / ms / 1e9
        mm = MM_FLOPS / rec["mm_ms"] / 1e9 if rec.get("mm_ms") else ceil["mm_tflop_s"][dtype]
        out.update(rate=f"{rate:.0f} TFLOP/s", pct=rate / mm, ceiling="mm", target=GEMM_TARGET)
    elif w.category == "attention":
        out.update(rate=f"{nflops / ms / 1e9:.0f} TFLOP/s", pct=(rec.get("sdpa_ms") or ceil["sdpa_ms"][dtype]) / ms,
                   ceiling="sdpa", target=ATTN_TARGET)
    else:
        out.update(rate=f"{nflops / ms / 1e9:.0f} TFLOP/s", pct=out["vs_inductor"], ceiling="ind", target=BLOCK_TARGET)
    misses = []
    if out["pct"] < out["target"]:
        misses.append(f"{out['ceiling']} {out['pct']:.2f}<{out['target']}")
    if out["vs_inductor"] < 1.0:
        misses.append("slower than inductor")
    if out["vs_eager"] < 1.0:
        misses.append("slower than eager")
    if dtype == "float32" and rec.get("err_ratio_vs_eager", 0) > ERR_RATIO_MAX:
        misses.append(f"err ratio {rec['err_ratio_vs_eager']:.1f}>{ERR_RATIO_MAX}")
    if rec["tritongen_compile_s"] > rec["inductor_compile_s"]:
        misses.append("compile slower")
    if not rec["correct"]:
        misses.append("WRONG vs eager")
    out["misses"] = misses
    return out


def compile_tritongen(graph, options: dict):
    b = get_backend("tritongen")
    return b.compile(graph, TensorSpec.of_inputs(graph), "cuda", b.parse_options(options))


def run_case(name: str, dtype: str, ceil: dict, rep_ms: int, options: dict) -> dict:
    w = builtin_workloads()[name]
    preset = dict(w.presets["gpu"])
    graph = bind(w.graph, preset, dtype)
    rec: dict = {"workload": name, "dtype": dtype, "category": w.category, "options": options}
    eager = lower_torch(graph)
    t0 = time.perf_counter()
    tg = compile_tritongen(graph, options)
    rec["tritongen_compile_s"] = time.perf_counter() - t0
    rec["stages_s"], rec["notes"] = tg.info.stages_s, tg.info.notes
    t0 = time.perf_counter()
    compile_tritongen(graph, options)
    rec["tritongen_warm_compile_s"] = time.perf_counter() - t0
    arts = tg.artifacts() or {}
    rec["tune_log"] = arts.get("tune_log")
    rec["kernels"] = {k: {f: v.get(f) for f in ("kind", "variant", "config", "n_regs", "n_spills", "shared_bytes")}
                      for k, v in arts.get("kernels", {}).items()}
    for k in arts.get("kernels", {}):  # which matrix instructions the PTX holds
        ptx = arts.get(f"{k}.ptx") or ""
        rec["kernels"][k]["ptx_wgmma"] = ptx.count("wgmma.mma_async")
        rec["kernels"][k]["ptx_mma_sync"] = ptx.count("mma.sync")
    torch._dynamo.reset()
    t0 = time.perf_counter()
    ind = torch.compile(lower_torch(graph), backend="inductor")
    errs = []
    for seed in (0, 1):
        xs = make_inputs(graph, seed, "cuda")
        want = eager(*xs)
        got = tg(*xs)
        ind_out = ind(*xs)
        if seed == 0:
            torch.cuda.synchronize()
            rec["inductor_compile_s"] = time.perf_counter() - t0
            e64 = fp64_errors(w, preset, dtype, xs, {"tritongen": got, "eager": want, "inductor": ind_out})
            rec.update({f"{k}_rel_l2_vs_fp64": v for k, v in e64.items()})
            rec["err_ratio_vs_eager"] = e64["tritongen"] / max(e64["eager"], 1e-300)
        errs.append(max(rel_l2(g, w_) for g, w_ in zip(got, want)))
        del want, got, ind_out
    rec["rel_l2_vs_eager"] = max(errs)
    rec["correct"] = all(math.isfinite(e) for e in errs) and max(errs) < {"float32": 1e-3}.get(dtype, 5e-2)
    prepared = tg.prepare(xs)
    calls = {"tritongen": lambda: tg.run(prepared), "inductor": lambda: ind(*xs), "eager": lambda: eager(*xs)}
    captured = graph_of(tg, prepared)
    if captured is not None:
        calls["tritongen_graph"] = captured.replay
    calls.update(ceiling_calls(w.category, dtype))
    medians, rec["rounds_ms"] = interleaved_ms(calls, rep_ms)
    rec.update({f"{name}_ms": ms for name, ms in medians.items()})
    rec.setdefault("tritongen_graph_ms", None)
    rec.update(grade(w, graph, dtype, rec, ceil))
    del tg, ind, xs, prepared, captured, calls
    torch._dynamo.reset()
    torch.cuda.empty_cache()
    return rec


def warm_up_processes(options: dict) -> float:
    """One small compile through each compiler, so per-process one-time costs (imports, CUDA context, compile
    workers) stay out of every case's compile time; returns the seconds it took."""
    t0 = time.perf_counter()
    w = builtin_workloads()["ew_sigmoid_relu"]
    g = bind(w.graph, w.presets["smoke"], "float32")
    xs = make_inputs(g, 0, "cuda")
    compile_tritongen(g, options)(*xs)
    torch.compile(lower_torch(g), backend="inductor")(*xs)
    torch.cuda.synchronize()
    torch._dynamo.reset()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", nargs="*", default=list(builtin_workloads()))
    ap.add_argument("--dtypes", nargs="*", default=list(DTYPES), choices=DTYPES)
    ap.add_argument("--rep-ms", type=int, default=50)
    ap.add_argument("--options", default="{}", help="tritongen options as JSON")
    ap.add_argument("--wide-dtypes", nargs="*", default=[], help="dtypes searched with search=wide (tune logs)")
    ap.add_argument("--budget-s", type=float, default=1e9, help="start no new case after this many seconds")
    ap.add_argument("--tag", default="", help="suffix of the JSON file name")
    ap.add_argument("--paired", nargs="*", default=[], help="bakeoff store URLs: print their newest runs' paired "
                    "speedups as one table")
    ap.add_argument("--paired-only", action="store_true", help="with --paired: print that table and exit")
    args = ap.parse_args()
    if args.paired_only and not args.paired:
        ap.error("--paired-only prints the stores named by --paired: name at least one")
    if args.paired_only:
        paired_report(args.paired)
        return
    t_start = time.perf_counter()
    os.environ.setdefault("BAKEOFF_TRITONGEN_CACHE_DIR", tempfile.mkdtemp(prefix="tritongen-bench-"))  # cold
    options = json.loads(args.options)
    import triton

    env = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
           "options": options, "wide_dtypes": args.wide_dtypes}
    print(json.dumps(env), flush=True)
    env["warm_up_s"] = warm_up_processes(options)
    ceil = ceilings(args.rep_ms, args.dtypes)
    print(json.dumps(ceil), flush=True)
    recs = []
    for dtype in args.dtypes:
        opts = {**options, "search": "wide"} if dtype in args.wide_dtypes else options
        for name in args.workloads:
            if time.perf_counter() - t_start > args.budget_s:
                recs.append({"workload": name, "dtype": dtype, "error": "not run: time budget"})
                continue
            try:
                rec = run_case(name, dtype, ceil, args.rep_ms, opts)
            except Exception as exc:  # noqa: BLE001 - a failing case is a row
                traceback.print_exc()
                rec = {"workload": name, "dtype": dtype, "error": f"{type(exc).__name__}: {exc}"[:500]}
                torch._dynamo.reset()
                torch.cuda.empty_cache()
            recs.append(rec)
            shown = {k: v for k, v in rec.items() if k not in ("kernels", "tune_log", "notes", "rounds_ms")}
            print(json.dumps(shown, default=str), flush=True)
            save(args.tag, env, ceil, recs)  # after every case: a run cut short keeps what it measured
    env["total_s"] = time.perf_counter() - t_start
    save(args.tag, env, ceil, recs)
    for r in recs:  # the chosen configs, before the table
        for k, v in (r.get("kernels") or {}).items():
            cfg = {a: b for a, b in (v.get("config") or {}).items() if a != "NUM_SMS"}
            print(f"  {r['workload']:18} {SHORT[r['dtype']]} {k:13} {cfg} regs={v.get('n_regs')} "
                  f"spills={v.get('n_spills')} wgmma={v.get('ptx_wgmma')}")
    report(recs, ceil)
    if args.paired:
        paired_report(args.paired, {(r["workload"], r["dtype"]): r for r in recs if "error" not in r})


def paired_records(urls: list[str]) -> tuple[list[str], Any]:
    """The newest run's records in each store (a case measured in several of them: the later store's), and the
    runs as `run_id (url)`."""
    import pandas as pd
    from sqlalchemy import create_engine

    cols = ("workload, dtype, backend, status, speedup_vs_eager, compile_s, details, latency_ms_median, "
            "eager_latency_ms_median")
    runs, frames = [], []
    for url in urls:
        engine = create_engine(url)
        run = pd.read_sql_query("select run_id from runs order by started_at desc limit 1", engine)["run_id"][0]
        runs.append(f"{run} ({url})")
        frames.append(pd.read_sql_query(f"select {cols} from records where run_id = '{run}'", engine))
    df = pd.concat(frames, ignore_index=True).drop_duplicates(["workload", "dtype", "backend"], keep="last")
    return runs, df


def paired_report(urls: list[str], dobench: dict | None = None) -> None:
    """bakeoff's paired speedups from the newest run in each store of `urls`, as one table: per workload and
    dtype, tritongen's and Inductor's speedup over eager (each timed interleaved with eager in its own case), their
    ratio (marked "~" where eager's own headline differs by more than EAGER_APART_REL between the two cases, so
    that the ratio carries eager's move; beside it, `ms`, the ratio of the two backends' own headlines), the
    speedups' quality (tritongen/Inductor), this script's do_bench ratio where it measured the same case, and both
    backends' cold compile (s, search included; the record's `compile_s`)."""
    import pandas as pd

    runs, df = paired_records(urls)
    facts = [{**row, **(json.loads(row["details"]) if isinstance(row["details"], str) else {})}
             for row in df.to_dict("records")]
    df["quality"] = [speedup_quality(f) for f in facts]
    df["facts"] = facts
    print(f"\nbakeoff paired speedups over eager, {'runs' if len(runs) > 1 else 'run'} {', '.join(runs)}")
    print(f"{'workload':18} {'dt':4} {'tg/eager':>8} {'ind/eager':>9} {'tg/ind':>7} {'ms':>5} {'do_bench':>8} "
          f"{'cold s tg/ind':>14}  quality")
    ratios: dict[str, list[float]] = {}
    by_ms: dict[str, list[float]] = {}
    slower_compile = moved = 0
    for (w, d), g in df.groupby(["workload", "dtype"], sort=False):
        by = {row.backend: row for row in g.itertuples()}
        tg, ind = by.get("tritongen"), by.get("inductor")
        if tg is None or ind is None or tg.status != "ok" or ind.status != "ok":
            print(f"{w:18} {SHORT.get(d, d):4} {'-':>8} {'-':>9} {'-':>7} {'-':>5} {'':>8}  "
                  f"tritongen {getattr(tg, 'status', None)}, inductor {getattr(ind, 'status', None)}")
            continue
        ratio = tg.speedup_vs_eager / ind.speedup_vs_eager
        tg_ms, ind_ms = headline_ms(tg.facts), headline_ms(ind.facts)
        own = ind_ms / tg_ms if tg_ms and ind_ms else None
        mark = "~" if eager_moved_between(tg.facts, ind.facts) and own else " "
        moved += mark == "~"
        ratios.setdefault(d, []).append(ratio)
        by_ms.setdefault(d, []).append(own if mark == "~" else ratio)
        db = (dobench or {}).get((w, d))
        cold = (f"{tg.compile_s:.1f} / {ind.compile_s:.1f}" if pd.notna(tg.compile_s) and pd.notna(ind.compile_s)
                else "-")
        slower_compile += cold != "-" and tg.compile_s > ind.compile_s
        print(f"{w:18} {SHORT.get(d, d):4} {tg.speedup_vs_eager:8.2f} {ind.speedup_vs_eager:9.2f} {ratio:6.2f}{mark} "
              f"{format(own, '5.2f') if own else '-':>5} {format(db['vs_inductor'], '8.2f') if db else '-':>8} "
              f"{cold:>14}  {tg.quality}/{ind.quality}")
    for d, xs in ratios.items():
        also = (f"; with the ~ ratios at their own headlines' {geomean(by_ms[d]):.3f}"
                if by_ms[d] != xs else "")
        print(f"paired geomean tritongen / Inductor {SHORT.get(d, d)}: {geomean(xs):.3f} over {len(xs)}{also}")
    print(f"cold compile longer than Inductor's: {slower_compile} of {sum(map(len, ratios.values()))} cases")
    if moved:
        print(f"~: eager's own headline differs by more than {EAGER_APART_REL:.0%} between the two cases ({moved} "
              "of them), so tg/ind carries eager's move; ms: Inductor's headline over tritongen's, timed apart")


def save(tag: str, env: dict, ceil: dict, recs: list[dict]) -> None:
    """The run so far as JSON under $OUT (when set)."""
    if os.environ.get("OUT"):
        path = Path(os.environ["OUT"]) / f"tritongen_vs_inductor{tag}.json"
        path.write_text(json.dumps({"env": env, "ceilings": ceil, "results": recs}, indent=1, default=str))


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def report(recs: list[dict], ceil: dict) -> None:
    mm = " ".join(f"{SHORT[d]} {v:.0f}" for d, v in ceil["mm_tflop_s"].items())
    sd = " ".join(f"{SHORT[d]} {v:.3f}" for d, v in ceil["sdpa_ms"].items())
    print(f"\nceilings: copy {ceil['copy_tb_s']:.2f} TB/s; torch.mm 8192^3 TFLOP/s: {mm}; F.sdpa causal ms: {sd}")
    print(f"{'workload':18} {'dt':4} {'tg ms':>8} {'ind ms':>8} {'eager ms':>8} {'vs ind':>6} {'vs eag':>6} "
          f"{'ceil':>9} {'err64':>8} {'ratio':>5} {'tg c/w s':>9} {'ind s':>5}  misses")
    by_dtype: dict[str, list[float]] = {}
    for r in recs:
        if "error" in r:
            print(f"{r['workload']:18} {SHORT[r['dtype']]:4} ERROR {r['error'][:90]}")
            continue
        by_dtype.setdefault(r["dtype"], []).append(r["vs_inductor"])
        mark = "~" if (r.get("vs_inductor_round_spread") or 0) > ROUND_SPREAD_MARK else " "
        print(f"{r['workload']:18} {SHORT[r['dtype']]:4} {r['tritongen_ms']:8.3f} {r['inductor_ms']:8.3f} "
              f"{r['eager_ms']:8.3f} {r['vs_inductor']:5.2f}{mark} {r['vs_eager']:6.2f} "
              f"{r['pct']:5.2f} {r['ceiling']:>3} "
              f"{r['tritongen_rel_l2_vs_fp64']:8.1e} {r['err_ratio_vs_eager']:5.2f} "
              f"{r['tritongen_compile_s']:4.1f}/{r['tritongen_warm_compile_s']:<4.1f} {r['inductor_compile_s']:5.1f}  "
              f"{'; '.join(r['misses']) or 'met'}"
              + (f" [{r['of_same_size_copy']:.2f} of a same-size copy]" if "of_same_size_copy" in r else ""))
    for d, xs in by_dtype.items():
        g = geomean(xs)
        print(f"geomean vs Inductor {SHORT[d]}: {g:.3f} over {len(xs)} (target {GEOMEAN_TARGET}) "
              f"{'met' if g >= GEOMEAN_TARGET else 'NOT met'}")
    print("(ceil: copy = fraction of copy bandwidth, mm = of torch.mm TFLOP/s in that dtype, sdpa = F.sdpa ms / ours, "
          "both timed in the case's rounds; ind = speedup over Inductor; err64 = rel L2 vs float64; ratio = err64 ours "
          f"/ eager's; tg c/w = cold/warm compile s; every ms the median of {BENCH_ROUNDS} interleaved rounds of "
          f"do_bench; ~: the rounds' own speedups over Inductor spread more than {ROUND_SPREAD_MARK:.0%})")


if __name__ == "__main__":
    main()
