"""Template: matmul with its fused epilogue (bias, activation, residual, cast) on the fp32 accumulator.

Tiles BLOCK_M x BLOCK_N over K in BLOCK_K steps with `tl.dot` (fp32 accumulation); programs walk the output in
groups of GROUP_M tile rows so neighbouring programs share A and B tiles in L2. Ragged M/N edges wrap the
load indices (no load masks) and mask the store; a ragged K masks the last step (EVEN_K says it is not).
Batch dims fold into M when B has none and A's rows are evenly strided; otherwise axis 1 of the grid walks them.

float32 on the GPU also gets a pre-split 3xTF32 twin (`_s3`): two pointwise launches split A
and B^T once into TF32 hi/lo planes (x = hi + lo, each rounded to nearest), row-major with K contiguous, which is
the K-major layout TF32 wgmma wants for both operands; the matmul then loads the four tiles through TMA and runs
three TF32 dots per K step, the small products first (lo*hi, hi*lo, hi*hi), into a partial sum that starts from
zero every CHAIN K steps and is added to the float32 accumulator in registers (the tensor cores' accumulation
truncates). Relative error per product about 2^-21, against 2^-11 for plain TF32.
"""
from __future__ import annotations

import math

from bakeoff.backends.tritongen.source import header, KernelSource, CodegenTarget, wide
from bakeoff.backends.tritongen.codegen_pointwise import pointwise_arg
from bakeoff.backends.tritongen.exprs import pointwise_expr
from bakeoff.backends.tritongen.indexing import linear_offset, merge_dims, row_col_offset
from bakeoff.backends.tritongen import codegen_splitk
from bakeoff.backends.tritongen.codegen_split import Planes, padded, split_info
from bakeoff.backends.tritongen.kernel_plan import Kernel, Plan
from bakeoff.backends.tritongen.views import broadcast_view
from bakeoff.backends.tritongen.symdim import dims


def _operands(plan: Plan, kernel: Kernel) -> dict:
    g = plan.graph
    mm = g.node(kernel.anchor)
    loads = dict(kernel.loads)
    out = dims(mm.shape)
    batch, (m, n) = out[:-2], out[-2:]
    k = dims(g.node(mm.inputs[0]).shape)[-1]
    a = broadcast_view(loads[mm.inputs[0]], batch + (m, k))
    b = broadcast_view(loads[mm.inputs[1]], batch + (k, n))
    a_rows = merge_dims(a.shape[:-1], a.strides[:-1])
    fold = all(s == 0 for d, s in zip(b.shape[:-2], b.strides[:-2]) if d != 1) and len(a_rows) <= 1
    info = {"a": a, "b": b, "k": k, "n": n, "batch": batch}
    if fold:
        info.update(m=math.prod(batch) * m, nb=1, sam=a_rows[0][1] if a_rows else k,
                    a_off=str(a.offset), b_off=str(b.offset))
    else:
        info.update(m=m, nb=math.prod(batch), sam=a.strides[-2],
                    a_off=f"{linear_offset('pid_b', batch, a.strides[:-2])} + {a.offset}",
                    b_off=f"{linear_offset('pid_b', batch, b.strides[:-2])} + {b.offset}")
    return info


def _tma_ok(plan: Plan, o: dict) -> bool:
    """TMA needs unit inner strides, 16-byte-aligned row strides and offsets, and no batch grid."""
    from bakeoff.workloads.ir import ITEMSIZE

    a, b = o["a"], o["b"]
    size = ITEMSIZE[plan.buffer(a.buffer).dtype]
    return (o["nb"] == 1 and a.strides[-1] == 1 and b.strides[-1] == 1 and (o["sam"] * size) % 16 == 0
            and (b.strides[-2] * size) % 16 == 0 and (a.offset * size) % 16 == 0 and (b.offset * size) % 16 == 0)


def _mainloop(o: dict, target: CodegenTarget, i64: str, tma: bool, split: bool = False) -> list[str]:
    """The K loop: pointer loads (wrapped M/N edges, masked ragged K), TMA descriptor loads (zero-filled edges), or
    the pre-split planes' four tiles through TMA and three TF32 dots (`split`)."""
    a, b, m, n, k = o["a"], o["b"], o["m"], o["n"], o["k"]
    kw = target.dot_kwargs("matmul")
    dot = f"        acc = tl.dot({target.dot_operand('a')}, {target.dot_operand('b')}, acc{kw})"
    if split:  # the tensor cores' own accumulation truncates (measured: 35x SGEMM's error when all of K went
        # into one wgmma accumulator), so each CHAIN K steps start from zero and are added in float32 registers
        tf32 = '' if target.interpret else ', input_precision="tf32"'
        return [
            "    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
            f"    for kk in range(0, tl.cdiv({k}, BLOCK_K * CHAIN)):",
            "        part = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
            "        for j in tl.static_range(CHAIN):",
            "            kc = (kk * CHAIN + j) * BLOCK_K",
            "            ah = ahi_desc.load([pid_m * BLOCK_M, kc])",
            "            al = alo_desc.load([pid_m * BLOCK_M, kc])",
            "            bh = bhi_desc.load([pid_n * BLOCK_N, kc])",
            "            bl = blo_desc.load([pid_n * BLOCK_N, kc])",
            f"            part = tl.dot(al, tl.trans(bh), part{tf32})  # small products first",
            f"            part = tl.dot(ah, tl.trans(bl), part{tf32})",
            f"            part = tl.dot(ah, tl.trans(bh), part{tf32})",
            "        acc += part  # float32 add, rounded to nearest",
        ]
    if tma:
        return [
            "    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
            f"    for kk in range(0, tl.cdiv({k}, BLOCK_K)):",
            "        a = a_desc.load([pid_m * BLOCK_M, kk * BLOCK_K])",
            "        b = b_desc.load([kk * BLOCK_K, pid_n * BLOCK_N])",
            dot,
        ]
    return [
        f"    offs_am = (offs_m % {m}){i64}",
        f"    offs_bn = (offs_n % {n}){i64}",
        "    offs_k = tl.arange(0, BLOCK_K)",
        f"    a_ptrs = {a.buffer} + {o['a_off']} + offs_am[:, None] * {o['sam']} + offs_k[None, :] * {a.strides[-1]}",
        f"    b_ptrs = {b.buffer} + {o['b_off']} + offs_k[:, None] * {b.strides[-2]} + offs_bn[None, :] * {b.strides[-1]}",
        "    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
        f"    for kk in range(0, tl.cdiv({k}, BLOCK_K)):",
        "        if EVEN_K:",
        "            a = tl.load(a_ptrs)",
        "            b = tl.load(b_ptrs)",
        "        else:",
        f"            a = tl.load(a_ptrs, mask=offs_k[None, :] < {k} - kk * BLOCK_K, other=0.0)",
        f"            b = tl.load(b_ptrs, mask=offs_k[:, None] < {k} - kk * BLOCK_K, other=0.0)",
        dot,
        f"        a_ptrs += BLOCK_K * {a.strides[-1]}",
        f"        b_ptrs += BLOCK_K * {b.strides[-2]}",
    ]


def _tile_rows_stride(plan: Plan, view, rows_shape: tuple[int, ...], o: dict) -> int | None:
    """Row stride of a full-tile epilogue operand a 2-D TMA descriptor can read or write (rows folded into one
    strided run of M rows, unit column stride, 16-byte-aligned rows and offset); None when it cannot."""
    from bakeoff.workloads.ir import ITEMSIZE

    if o["nb"] != 1:
        return None
    v = broadcast_view(view, rows_shape)
    runs = merge_dims(v.shape[:-1], v.strides[:-1])
    size = ITEMSIZE[plan.buffer(v.buffer).dtype]
    if len(runs) != 1 or runs[0][0] != o["m"] or runs[0][1] == 0 or v.strides[-1] != 1 or v.shape[-1] != o["n"]:
        return None
    sr = runs[0][1]
    return sr if (sr * size) % 16 == 0 and (v.offset * size) % 16 == 0 and o["n"] * size >= 16 else None


def _epilogue_descs(plan: Plan, kernel: Kernel, o: dict) -> dict[tuple[str, int], str]:
    """('load'|'store', node id) -> the descriptor line, for the epilogue tiles TMA can move."""
    g = plan.graph
    mm = g.node(kernel.anchor)
    rows_shape = dims(mm.shape)
    out = {}
    for what, items in (("load", kernel.loads), ("store", kernel.stores)):
        for nid, view in items:
            if what == "load" and nid in mm.inputs:
                continue
            sr = _tile_rows_stride(plan, view, rows_shape, o)
            if sr is not None:
                v = broadcast_view(view, rows_shape) if what == "load" else view
                out[(what, nid)] = (f"    {what[0]}{nid}_desc = tl.make_tensor_descriptor({v.buffer} + {v.offset}, "
                                    f"shape=[{o['m']}, {o['n']}], strides=[{sr}, 1], block_shape=[BLOCK_M, BLOCK_N])")
    return out


def _epilogue(plan: Plan, kernel: Kernel, o: dict, i64: str, descs: dict | None = None) -> list[str]:
    """Bias, activation, residual... on the fp32 tile, then the stores; `descs`: tiles moved by TMA."""
    descs = descs or {}
    g = plan.graph
    mm = g.node(kernel.anchor)
    m, n = o["m"], o["n"]
    lines = [
        f"    r = (pid_b * {m} + offs_m{i64})[:, None]" if o["nb"] > 1 else f"    r = offs_m{i64}[:, None]",
        "    c = offs_n[None, :]",
        f"    mmask = offs_m[:, None] < {m}",
        f"    nmask = c < {n}",
        "    mask = mmask & nmask",
        f"    v{mm.id} = acc",
    ]
    rows_shape = dims(mm.shape)
    for nid, view in kernel.loads:
        if nid in mm.inputs and not any(nid in g.node(e).inputs for e in kernel.nodes if e != mm.id):
            continue
        if ("load", nid) in descs:
            lines.append(f"    v{nid} = l{nid}_desc.load([pid_m * BLOCK_M, pid_n * BLOCK_N]).to(tl.float32)")
            continue
        v = broadcast_view(view, rows_shape)
        off = row_col_offset("r", "c", v.shape, v.strides, v.offset)
        row_dep = any(s != 0 and d != 1 for d, s in zip(v.shape[:-1], v.strides[:-1]))
        col_dep = v.strides[-1] != 0 and v.shape[-1] != 1
        mask = {(True, True): "mask", (True, False): "mmask", (False, True): "nmask"}.get((row_dep, col_dep))
        m_arg = f", mask={mask}, other=0.0" if mask else ""
        lines.append(f"    v{nid} = tl.load({v.buffer} + {off}{m_arg}).to(tl.float32)")
    for nid in kernel.nodes:
        if nid == mm.id:
            continue
        node = g.node(nid)
        args = [pointwise_arg(g, i) for i in node.inputs]
        lines.append(f"    v{nid} = {pointwise_expr(node, args, f'(r % {rows_shape[-2]})', 'c')}")
    for nid, view in kernel.stores:
        if ("store", nid) in descs:
            lines.append(f"    s{nid}_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], "
                         f"v{nid}.to({view.buffer}.dtype.element_ty))")
            continue
        off = row_col_offset("r", "c", view.shape, view.strides, view.offset)
        lines.append(f"    tl.store({view.buffer} + {off}, v{nid}.to({view.buffer}.dtype.element_ty), mask=mask)")
    return lines


# program id -> this program's output tile (pid_m, pid_n), grouped by GROUP_M tile rows; offs_m, offs_n
TILE = ["    group_id = pid // num_pid_in_group",
        "    first_pid_m = group_id * GROUP_M",
        "    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)",
        "    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)",
        "    pid_n = (pid % num_pid_in_group) // group_size_m",
        "    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
        "    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)"]

_MODES = {"": "pointer loads", "_tma": "TMA loads (and TMA epilogue tiles where layouts allow)",
          "_ptma": "TMA loads, persistent over NUM_SMS programs",
          "_s3": "3xTF32 on pre-split TF32 hi/lo planes through TMA (and TMA epilogue tiles where layouts allow)"}


def _function(plan: Plan, kernel: Kernel, target: CodegenTarget, o: dict, mode: str) -> list[str]:
    """One jit function: mode '' (pointer loads), '_tma' (TMA descriptors), '_ptma' (persistent + TMA) or '_s3'
    (pre-split 3xTF32 through TMA)."""
    m, n, k = o["m"], o["n"], o["k"]
    a, b = o["a"], o["b"]
    i64 = ".to(tl.int64)" if wide(plan, kernel) else ""
    persistent = mode == "_ptma"
    split = mode == "_s3"
    params = kernel.buffers() + (tuple(f"{kernel.name}_{w}" for w in ("ahi", "alo", "bhi", "blo")) if split else ())
    lines = [
        "@triton.jit",
        f"def {kernel.name}{mode}({', '.join(params)}, BLOCK_M: tl.constexpr, "
        "BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr"
        + (", CHAIN: tl.constexpr" if split else "") + (", NUM_SMS: tl.constexpr):" if persistent else "):"),
        f'    """Matmul {o["nb"]} x ({m} x {k}) @ ({k} x {n}) + epilogue, {_MODES[mode]}; '
        f'one {"loop step" if persistent else "program"} = one BLOCK_M x BLOCK_N tile."""',
        f"    num_pid_m = tl.cdiv({m}, BLOCK_M)",
        f"    num_pid_n = tl.cdiv({n}, BLOCK_N)",
        "    num_pid_in_group = GROUP_M * num_pid_n",
    ]
    if split:  # the planes are contiguous (m x kp and n x kp); kp pads K to 16-byte rows
        kp = padded(k)
        lines += [f"    {w}_desc = tl.make_tensor_descriptor({kernel.name}_{w}, shape=[{rows}, {k}], strides=[{kp}, 1], "
                  f"block_shape=[{blk}, BLOCK_K])" for w, rows, blk in
                  (("ahi", m, "BLOCK_M"), ("alo", m, "BLOCK_M"), ("bhi", n, "BLOCK_N"), ("blo", n, "BLOCK_N"))]
        descs = _epilogue_descs(plan, kernel, o) if mode == "_s3" else {}
        lines += list(descs.values())
    elif mode:
        lines += [
            f"    a_desc = tl.make_tensor_descriptor({a.buffer} + {o['a_off']}, shape=[{m}, {k}], "
            f"strides=[{o['sam']}, 1], block_shape=[BLOCK_M, BLOCK_K])",
            f"    b_desc = tl.make_tensor_descriptor({b.buffer} + {o['b_off']}, shape=[{k}, {n}], "
            f"strides=[{b.strides[-2]}, 1], block_shape=[BLOCK_K, BLOCK_N])",
        ]
        # epilogue tiles through TMA only where the K loop's shared memory is free again (not persistent:
        # there the next tile's loads overlap the epilogue, and 128 x 256 residual + output tiles overflow it)
        descs = _epilogue_descs(plan, kernel, o) if mode == "_tma" else {}
        lines += list(descs.values())
    else:
        descs = {}
    body = [
        *TILE,
        *_mainloop(o, target, i64, bool(mode), split),
        *_epilogue(plan, kernel, o, i64, descs),
    ]
    if persistent:  # flatten: the next tile's loads can start while this tile's epilogue runs
        lines += ["    pid_b = 0",
                  "    for pid in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_SMS, flatten=True):"]
        lines += ["    " + line for line in body]
    else:
        lines += ["    pid = tl.program_id(0)", "    pid_b = tl.program_id(1)"] + body
    return lines


def _planes(kernel: Kernel, o: dict) -> list[Planes]:
    """A (m x k) and B^T (n x k), read through their strides, as TF32 planes."""
    a, b, m, n, k = o["a"], o["b"], o["m"], o["n"], o["k"]
    return [Planes(f"{kernel.name}_a", a.buffer, f"{a.buffer} + {o['a_off']} + r * {o['sam']} + c * {a.strides[-1]}",
                   1, m, k, "A"),
            Planes(f"{kernel.name}_b", b.buffer, f"{b.buffer} + {o['b_off']} + c * {b.strides[-2]} + r * {b.strides[-1]}",
                   1, n, k, "B^T")]


def generate(plan: Plan, kernel: Kernel, target: CodegenTarget) -> KernelSource:
    o = _operands(plan, kernel)
    tma = target.tma and _tma_ok(plan, o)
    split = target.split_tf32() and o["nb"] == 1
    lines = _function(plan, kernel, target, o, "")
    if tma:
        for mode in ("_tma", "_ptma"):
            lines += ["", ""] + _function(plan, kernel, target, o, mode)
    if o["nb"] == 1:  # split-K: partial sums over K slices, then the epilogue kernel adds them
        i64 = ".to(tl.int64)" if wide(plan, kernel) else ""
        lines += ["", ""] + codegen_splitk.functions(kernel, target, o, TILE, _epilogue(plan, kernel, o, i64), i64)
    info = None
    if split:
        i64 = ".to(tl.int64)" if wide(plan, kernel) else ""
        planes = _planes(kernel, o)
        info = split_info(kernel.name, planes)
        for p, (fn, _, _) in zip(planes, info["launches"]):
            lines += ["", ""] + p.function(fn, i64)
        lines += ["", ""] + _function(plan, kernel, target, o, "_s3")
    text = header(f"matmul kernel {kernel.name}", target) + "\n".join(lines) + "\n"
    sizes = {"m": o["m"], "n": o["n"], "k": o["k"], "batch": o["nb"], "splitk": int(o["nb"] == 1)}
    return KernelSource(kernel, kernel.name, text, kernel.buffers(), sizes, "tma" if tma else "", split=info)
