"""Does a memory-bound kernel keep a time of its own in each process, and is the L2 flush why? (GPU only; ~40 s.)

bakeoff flushes the L2 before each timed call by writing a 256 MB buffer (`CacheFlusher`: `zero_()`, as
`triton.testing.do_bench` does), which leaves the L2 full of dirty lines that the call then writes back. Eager's
RMSNorm (one memory-bound kernel) read 0.107 to 0.126 ms in the cases of one H100 run at one clock, each worker
process keeping its own time. Here each of PROCESSES fresh processes times the same calls after three flushes,
interleaved in rounds: `write` (zero_: dirty lines, bakeoff's and do_bench's), `read` (a sum over the buffer:
clean lines) and `none`; per mode, the per-process medians and their spread across processes. A spread that is
there after `write` and gone after `read` puts the per-process time on the flush's write-backs; one there in
every mode puts it on the process (where its buffers landed), not the flush.

    PYTHONPATH=. python3 benchmarks/flush_process_check.py [--processes 6] [--hold-gib 0 8 24 48] [--json OUT.json]

`--hold-gib`: each process first allocates and keeps that much device memory, in turn, as a worker beside a
backend's memory pool does; a spread that appears with it puts the per-process time on where the buffers land.
Whole GiB leave an input's low address bits as they were, and on an H100 those decide eager's RMSNorm time:
`address_check.py` moves the input by KiB instead.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.noise_share import spread  # noqa: E402  (max / min - 1 over two or more values, else None)

MODES = ("write", "read", "none")
ROWS, COLS = 16384, 4096  # the rmsnorm workload's gpu preset
FLUSH_BYTES = 256 * 1024 * 1024
ROUNDS, CALLS = 10, 20  # per mode: ROUNDS rounds of CALLS calls, the modes interleaved round by round


def summarise(per_process: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per probe and mode: each process's median (ms) and their spread across processes."""
    out: dict[str, dict[str, Any]] = {}
    for probe in per_process[0]["medians_ms"]:
        out[probe] = {}
        for mode in MODES:
            meds = [p["medians_ms"][probe][mode] for p in per_process]
            out[probe][mode] = {"medians_ms": meds, "spread": spread(meds)}
    return out


def hold_of(process: int, hold_gib: Sequence[float]) -> float:
    """GiB the `process`-th child allocates and keeps before its buffers: `hold_gib` in turn (none without it)."""
    return float(hold_gib[process % len(hold_gib)]) if hold_gib else 0.0


def child(hold_gib: float = 0.0) -> dict[str, Any]:
    """One process: the probes' median ms after each flush mode, CUDA events around each call; first it allocates
    and keeps `hold_gib` GiB, as a worker whose backend holds a memory pool (XLA, IREE) has, so that its buffers
    land elsewhere in the device's memory."""
    import torch

    held = torch.empty(int(hold_gib * 2**30), device="cuda", dtype=torch.uint8) if hold_gib else None
    x = torch.randn(ROWS, COLS, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(COLS, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(x)
    buf = torch.empty(FLUSH_BYTES // 4, device="cuda", dtype=torch.int32)
    probes = {"rms_norm bf16": lambda: torch.nn.functional.rms_norm(x, (COLS,), w, 1e-6),
              "add bf16": lambda: torch.add(x, 1.0, out=out)}
    flush = {"write": buf.zero_, "read": lambda: buf.sum(dtype=torch.int64), "none": lambda: None}
    times: dict[str, dict[str, list[float]]] = {p: {m: [] for m in MODES} for p in probes}
    for fn in probes.values():
        fn()
    torch.cuda.synchronize()
    for _ in range(ROUNDS):
        for name, fn in probes.items():
            for mode in MODES:
                pairs = []
                for _ in range(CALLS):
                    flush[mode]()
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    fn()
                    end.record()
                    pairs.append((start, end))
                torch.cuda.synchronize()
                times[name][mode] += [s.elapsed_time(e) for s, e in pairs]
    del held
    return {"x_ptr": x.data_ptr(), "buf_ptr": buf.data_ptr(), "hold_gib": hold_gib,
            "medians_ms": {p: {m: statistics.median(v) for m, v in by.items()} for p, by in times.items()}}


def print_table(summary: dict[str, dict[str, Any]], holds: Sequence[float] = ()) -> None:
    if any(holds):
        print("GiB held before the buffers, per process: " + " ".join(f"{h:g}" for h in holds))
    for probe, by in summary.items():
        for mode, got in by.items():
            meds = " ".join(f"{m:.4f}" for m in got["medians_ms"])
            s = got["spread"]
            print(f"{probe:14s} {mode:5s}  spread {'-' if s is None else format(s, '6.1%')}  per process ms: {meds}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, default=6)
    ap.add_argument("--json", help="write the per-process medians and the summary here")
    ap.add_argument("--hold-gib", type=float, nargs="*", default=[],
                    help="GiB each process allocates and keeps before its buffers, in turn (e.g. 0 8 24 48): does "
                         "where its buffers land give each process a time of its own?")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.hold_gib[0] if args.hold_gib else 0.0)))
        return
    per_process = []
    for i in range(args.processes):
        hold = hold_of(i, args.hold_gib)
        got = subprocess.run([sys.executable, __file__, "--child", "--hold-gib", str(hold)], capture_output=True,
                             text=True, check=True)
        per_process.append(json.loads(got.stdout.strip().splitlines()[-1]))
    summary = summarise(per_process)
    print_table(summary, [p.get("hold_gib", 0.0) for p in per_process])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"processes": per_process, "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()
