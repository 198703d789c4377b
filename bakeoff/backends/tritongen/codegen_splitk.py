"""Split-K for a matmul with few output tiles or a long K: partial sums over K slices, then the epilogue.

`<name>_skp` runs a grid of (tiles, SPLIT_K) programs; program (t, s) sums its slice of K, ceil(K / SPLIT_K)
rounded up to BLOCK_K, from zero and writes the float32 partial tile to `<name>_part[s]`. `<name>_ske` (one program
per EPI_M x EPI_N tile of the output, smaller than the partial kernel's so that more multiprocessors read the
partials) adds the SPLIT_K partials in float32, loading UNROLL partial tiles as one block in a pipelined loop (so
that their loads are in flight together), and runs the matmul's own epilogue (bias, activation, residual, cast) on
the sum. One program per partial tile, adding its partials one dependent load after another, had left a 256 x 256
output to a few programs that waited on memory latency for each partial tile.

Two reasons to split: a 256 x 256 output is 2-4 tiles, so an unsplit kernel keeps 2-4 of 132 multiprocessors busy;
and the tensor cores' own accumulation truncates, so a running sum over K = 65536 16-bit products carried twice
eager's error, while slices of at most 16384 summed in float32 registers do not.
"""
from __future__ import annotations

from bakeoff.backends.tritongen.source import CodegenTarget
from bakeoff.backends.tritongen.kernel_plan import Kernel

SLICE_K = 16384  # the longest K slice one program sums: a longer K is always split (see the module docstring)
# the shortest slice: on an H100, 256 x 65536 x 256 (16-bit) ran 0.93-0.95 of torch.mm in slices of 2048 (4 warps),
# 0.80-0.86 in slices of 1024 (8 warps: twice the partials to write and add), 0.85 in slices of 4096
MIN_SLICE_K = 2048
EPI_M, EPI_N, UNROLL = 16, 64, 8  # the epilogue kernel's tile; the partial tiles it loads as one block (a power of 2)


def partial_name(kernel: Kernel) -> str:
    return f"{kernel.name}_part"


def functions(kernel: Kernel, target: CodegenTarget, o: dict, tile: list[str], epilogue: list[str],
              i64: str) -> list[str]:
    """The two jit functions of the split-K form; `tile` and `epilogue` are the matmul template's own lines."""
    a, b, m, n, k = o["a"], o["b"], o["m"], o["n"], o["k"]
    part = partial_name(kernel)
    params = ", ".join(kernel.buffers() + (part,))
    head = [f"    num_pid_m = tl.cdiv({m}, BLOCK_M)", f"    num_pid_n = tl.cdiv({n}, BLOCK_N)",
            "    num_pid_in_group = GROUP_M * num_pid_n", "    pid = tl.program_id(0)", "    pid_b = 0"]
    tile_at = f"{part} + pid_k * {int(m) * int(n)} + offs_m{i64}[:, None] * {n} + offs_n[None, :]"
    tile_mask = f"(offs_m[:, None] < {m}) & (offs_n[None, :] < {n})"
    kw = target.dot_kwargs("matmul")
    k_per = f"tl.cdiv(tl.cdiv({k}, SPLIT_K), BLOCK_K) * BLOCK_K"
    return [
        "@triton.jit",
        f"def {kernel.name}_skp({params}, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, "
        "GROUP_M: tl.constexpr, SPLIT_K: tl.constexpr):",
        f'    """Split-K partials of ({m} x {k}) @ ({k} x {n}): program (tile, s) sums slice s of K from zero."""',
        *head, "    pid_k = tl.program_id(1)", *tile,
        f"    k_per = {k_per}",
        f"    offs_k = pid_k * k_per + tl.arange(0, BLOCK_K)",
        f"    a_ptrs = {a.buffer} + {o['a_off']} + (offs_m % {m}){i64}[:, None] * {o['sam']} + "
        f"offs_k{i64}[None, :] * {a.strides[-1]}",
        f"    b_ptrs = {b.buffer} + {o['b_off']} + offs_k{i64}[:, None] * {b.strides[-2]} + "
        f"(offs_n % {n}){i64}[None, :] * {b.strides[-1]}",
        "    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
        "    for kk in range(0, k_per // BLOCK_K):",
        f"        kmask = offs_k + kk * BLOCK_K < {k}",
        "        a = tl.load(a_ptrs, mask=kmask[None, :], other=0.0)",
        "        b = tl.load(b_ptrs, mask=kmask[:, None], other=0.0)",
        f"        acc = tl.dot({target.dot_operand('a')}, {target.dot_operand('b')}, acc{kw})",
        f"        a_ptrs += BLOCK_K * {a.strides[-1]}",
        f"        b_ptrs += BLOCK_K * {b.strides[-2]}",
        f"    tl.store({tile_at}, acc, mask={tile_mask})",
        "",
        "",
        "@triton.jit",
        f"def {kernel.name}_ske({params}, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr, "
        "SPLIT_K: tl.constexpr, UNROLL: tl.constexpr):",
        f'    """Split-K epilogue: the SPLIT_K partial tiles added in float32, UNROLL of them loaded in one block '
        f'and summed, then the matmul\'s epilogue."""',
        *head, *tile,
        "    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
        "    rows = tl.arange(0, UNROLL * BLOCK_M)  # UNROLL partial tiles stacked: partial rows // BLOCK_M",
        "    r_m = pid_m * BLOCK_M + rows % BLOCK_M",
        "    for k0 in tl.range(0, tl.cdiv(SPLIT_K, UNROLL), num_stages=3):",
        "        ks = k0 * UNROLL + rows // BLOCK_M",
        f"        at = {part} + ks{i64}[:, None] * {int(m) * int(n)} + r_m{i64}[:, None] * {n} + offs_n[None, :]",
        f"        got = tl.load(at, mask=(ks[:, None] < SPLIT_K) & (r_m[:, None] < {m}) & (offs_n[None, :] < {n}), "
        "other=0.0)",
        "        acc += tl.sum(tl.reshape(got, (UNROLL, BLOCK_M, BLOCK_N)), 0)",
        *epilogue,
    ]


def split_count(k, tiles: int, sms: int) -> int:
    """SPLIT_K for a K of `k` over `tiles` output tiles on `sms` multiprocessors: enough slices to fill the
    multiprocessors twice, in slices of at least MIN_SLICE_K, and never a slice over SLICE_K; 1 when neither
    applies."""
    k = int(k)
    fill = min(-(-2 * sms // tiles), k // MIN_SLICE_K) if tiles < sms and k >= 4096 else 1
    return max(fill, -(-k // SLICE_K), 1)
