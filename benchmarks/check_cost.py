"""What one seed's numeric check costs at large sizes: the statistic functions before issue 10 (kept in
tests/legacy_numerics.py) against the current `check_outputs`, on the same output, eager output and float64
reference, on the CPU or a GPU. Prints seconds per check and the speed-up; the figures are the same
(tests/test_numerics_equivalence.py checks that to the bit).

    python benchmarks/check_cost.py                                   # CPU, 4096 x 4096, three dtypes
    python benchmarks/check_cost.py --device cuda --shape 8192x8192 --shape 8x32x4096x128
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

import torch  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

import legacy_numerics as legacy  # noqa: E402
from bakeoff.harness.measure.checks import check_outputs  # noqa: E402
from bakeoff.harness.measure.numerics import verdict  # noqa: E402
from bakeoff.workloads.builder import GraphBuilder  # noqa: E402

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def legacy_check(out, eager, ref):
    """The former check_outputs of one output: eager vs fp64, backend vs fp64 and vs eager, the worst element."""
    e_ref = legacy.error_stats(eager, ref)
    v_ref = legacy.error_stats(out, ref)
    verdict(v_ref, e_ref, eager.dtype)
    legacy.error_stats(out, eager)
    legacy.worst_element(out, ref, eager)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(fn, device: str, repeats: int) -> float:
    """Median seconds of `repeats` calls, synchronized."""
    fn()
    times = []
    for _ in range(repeats):
        _sync(device)
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--shape", action="append", help="e.g. 4096x4096 (repeat; default 4096x4096)")
    parser.add_argument("--dtype", action="append", choices=sorted(DTYPES))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    shapes = [tuple(int(d) for d in s.split("x")) for s in (args.shape or ["4096x4096"])]
    table = Table("shape", "dtype", "device", "elements", "before s/check", "now s/check", "speed-up",
                  title="one seed's check of one output (vs fp64, vs eager, eager vs fp64, worst element)")
    for shape in shapes:
        b = GraphBuilder("check_cost")
        graph = b.finish([b.tanh(b.input("x", shape))])
        for name in args.dtype or ["float32", "bfloat16", "float16"]:
            dtype = DTYPES[name]
            g = torch.Generator(device=args.device).manual_seed(0)
            ref = torch.randn(shape, dtype=torch.float64, device=args.device, generator=g)
            noise = torch.randn(shape, dtype=torch.float64, device=args.device, generator=g)
            out = (ref * (1 + 1e-3 * noise)).to(dtype)
            del noise
            eager = ref.to(dtype)
            before = timed(lambda: legacy_check(out, eager, ref), args.device, args.repeats)
            now = timed(lambda: check_outputs(graph, 0, [out], [eager], [ref]), args.device, args.repeats)
            table.add_row("x".join(map(str, shape)), name, args.device, f"{out.numel():,}", f"{before:.3f}",
                          f"{now:.3f}", f"{before / now:.1f}x")
            del ref, out, eager
    Console(width=140).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
