"""Template: last-axis row reductions with their pointwise prologue and epilogue, BLOCK_M rows a program.

Persistent form (the row fits one tile): load each row once, keep it in registers, reduce and finish in one
pass. Its twin `<name>_rows` (the config's ROWS=1) runs a fixed grid of NUM_PROGRAMS programs that each walk
row blocks: per-column operands (LayerNorm's weight and bias) are loaded and converted once per program, and the
next row block's loads are issued before this one is reduced, so loads stay in flight while rows are finished.
Looped form (longer rows): one loop over column chunks per reduction, recomputing its pointwise cone from the
inputs, then a last loop that computes and stores the full-width outputs; softmax's max and
sum(exp(y - max)) share one online loop (running max, rescaled running sum). The reduction loops load with
`evict_last` and the last loop with `evict_first`, as Inductor's looped reductions do: the row stays in L2 for
the passes that re-read it and leaves it after the last. A row that fits one tile gets the looped form too, as
the twin `<name>_loop` (the config's LOOP=1): on the H200 a hand-written looped RMSNorm moved 16384 x 4096 float32
rows faster than the persistent form (130 against 133 us; bf16 68 against 70), and in tritongen's searches the
twin won float32 softmax and LayerNorm+GELU and 16-bit RMSNorm (NOTES.md).
Reductions accumulate in float32 whatever the input dtype. The looped form's running sums are compensated
(Kahan): each lane's sum over many column chunks keeps what a plain add would drop, so a long row absorbs no
small terms (one large term and many small ones lost them all in a plain per-lane sum); the lanes then meet in
Triton's tree reduction. A lane that sums at most COMPENSATE_OVER blocks (the looped twin of a row that fits one
tile: two or four) adds them plainly (`COMPENSATE` False, a constexpr of the launch): a few roundings, below
the tree reduction's own, and no dependent chain of four operations per element.
"""
from __future__ import annotations

import math

from bakeoff.workloads.ir import Graph

from bakeoff.backends.tritongen.source import header, KernelSource, CodegenTarget, to_f32, whole_mask, wide
from bakeoff.backends.tritongen.codegen_pointwise import pointwise_arg
from bakeoff.backends.tritongen.exprs import pointwise_expr
from bakeoff.backends.tritongen.indexing import row_col_offset
from bakeoff.backends.tritongen.kernel_plan import Kernel, Plan
from bakeoff.backends.tritongen.views import View, broadcast_view

_REDUCE_INIT = {"sum": "0.0", "mean": "0.0", "max": '-float("inf")'}
COMPENSATE_OVER = 4  # column blocks a lane sums before its running sums are compensated
LOG2E = 1.4426950408889634  # exp(x) = exp2(x * LOG2E), as the modules' _exp


class _Row:
    """Shared state of one row kernel: which values are per-row ('stat') and which are full width."""

    def __init__(self, plan: Plan, kernel: Kernel) -> None:
        self.plan = plan
        self.g: Graph = plan.graph
        self.k = kernel
        self.lead, self.n = kernel.domain[:-1], kernel.domain[-1]
        self.rows = math.prod(self.lead)
        self.loads = dict(kernel.loads)
        self.mine = set(kernel.nodes)
        self.col_mask = "cmask"  # what reductions mask out; None when the tile is exactly the row


    def is_stat(self, nid: int) -> bool:
        shape = self.g.node(nid).shape
        return self.n != 1 and (not shape or int(shape[-1]) == 1)

    def deps(self, nid: int, view: View) -> tuple[bool, bool]:
        """(row-dependent, column-dependent) of a load."""
        stat = self.is_stat(nid)
        v = broadcast_view(view, self.lead + (1,) if stat else self.k.domain)
        row_dep = any(s != 0 and d != 1 for d, s in zip(v.shape[:-1], v.strides[:-1]))
        return row_dep, not stat and v.strides[-1] != 0 and v.shape[-1] != 1

    def load_line(self, nid: int, view: View, indent: str, row: str = "r", var: str = "v",
                  convert: bool = True, evict: str | None = None) -> str:
        stat = self.is_stat(nid)
        target = self.lead + (1,) if stat else self.k.domain
        v = broadcast_view(view, target)
        off = row_col_offset(row, None if stat else "c", v.shape, v.strides, v.offset)
        rmask = "rmask" if row == "r" else f"({row} < {self.rows})"
        masks = {(True, True): f"{rmask} & cmask", (True, False): rmask, (False, True): "cmask"}
        mask = masks.get(self.deps(nid, view))
        m = f", mask={mask}, other=0.0" if mask else ""
        m += f", eviction_policy='{evict}'" if evict else ""
        load = f"tl.load({v.buffer} + {off}{m})"
        return f"{indent}{var}{nid} = " + (to_f32(load, self.plan.buffer(v.buffer).dtype) if convert else load)

    def node_line(self, nid: int, indent: str) -> str:
        n = self.g.node(nid)
        args = [pointwise_arg(self.g, i) for i in n.inputs]
        x = args[0]
        if n.op in ("sum", "mean"):  # rows past the end are never stored, so only columns need masking
            x = f"tl.where({self.col_mask}, {x}, 0.0)" if self.col_mask else x
            expr = f"tl.sum({x}, axis=1, keep_dims=True)"
            return f"{indent}v{nid} = {expr}" + (f" / {float(self.n)!r}" if n.op == "mean" else "")
        if n.op == "max":
            x = f'tl.where({self.col_mask}, {x}, -float("inf"))' if self.col_mask else x
            return f"{indent}v{nid} = tl.max({x}, axis=1, keep_dims=True)"
        if n.op == "exp" and self.row_shifted(n.inputs[0]):  # exp(x - m), m per row: one FFMA, then ex2
            x, m = (pointwise_arg(self.g, i) for i in self.g.node(n.inputs[0]).inputs)
            return f"{indent}v{nid} = _exp2(tl.fma({x}, {LOG2E!r}, -_mul_rn({m}, {LOG2E!r})))"
        if n.op == "div" and not self.is_stat(nid) and n.inputs[1] in self.mine and self.is_stat(n.inputs[1]):
            return f"{indent}v{nid} = {args[0]} * (1.0 / {args[1]})"  # one division per row, not per element
        row = f"(r % {self.lead[-1]})" if self.lead else "0"
        return f"{indent}v{nid} = {pointwise_expr(n, args, row, 'c')}"

    def row_shifted(self, nid: int) -> bool:
        """`nid` is this kernel's full-width x - m with m a per-row value (softmax's shift by its row max): its
        exp is written exp2(x * log2(e) - m * log2(e)), m * log2(e) once per row and the rest one FFMA, not a
        subtraction and a multiply. The rounding moves from x - m to m * log2(e), common to the whole row, and a
        shift common to a row cancels in anything normalized by its sum, provided every use of it is the same
        rounded value (`_mul_rn`, as the online loop's rescale needs)."""
        n = self.g.node(nid)
        return (nid in self.mine and n.op == "sub" and not self.is_stat(nid) and self.is_stat(n.inputs[1])
                and self.g.node(n.inputs[0]).op != "const")

    def store_line(self, nid: int, view: View, indent: str) -> str:
        stat = self.is_stat(nid)
        off = row_col_offset("r", None if stat else "c", view.shape, view.strides, view.offset)
        mask = "rmask" if stat else "mask"
        return f"{indent}tl.store({view.buffer} + {off}, v{nid}.to({view.buffer}.dtype.element_ty), mask={mask})"

    def cone(self, roots: list[int]) -> list[int]:
        """Full-width nodes of this kernel needed for `roots` (topological), and the loads they read."""
        need: set[int] = set()
        stack = list(roots)
        while stack:
            x = stack.pop()
            if x in need or self.is_stat(x) or self.g.node(x).op == "const":
                continue
            if x in self.mine or x in self.loads:
                need.add(x)
                if x in self.mine:
                    stack.extend(self.g.node(x).inputs)
        return sorted(need)


def _prologue(row: _Row, kernel: Kernel, plan: Plan, block_n: str) -> list[str]:
    return [
        "    pid = tl.program_id(0)" + (".to(tl.int64)" if wide(plan, kernel) else ""),
        "    r = pid * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]",
        f"    rmask = {whole_mask('r', row.rows, 'BLOCK_M')}",
        f"    cols = tl.arange(0, {block_n})[None, :]",
    ]


def _persistent(row: _Row, plan: Plan, kernel: Kernel) -> list[str]:
    if row.n == 1 << max(row.n - 1, 0).bit_length():
        row.col_mask = None  # BLOCK_N == N: every column is real
    lines = _prologue(row, kernel, plan, "BLOCK_N")
    lines += ["    c = cols", f"    cmask = {whole_mask('c', row.n, 'BLOCK_N')}", "    mask = rmask & cmask"]
    lines += [row.load_line(nid, v, "    ") for nid, v in kernel.loads]
    lines += [row.node_line(nid, "    ") for nid in kernel.nodes]
    lines += [row.store_line(nid, v, "    ") for nid, v in kernel.stores]
    return lines


def _row_loop(row: _Row, plan: Plan, kernel: Kernel) -> list[str]:
    """The persistent form over a fixed grid: each program walks row blocks pid, pid + NUM_PROGRAMS, ...;
    column-only loads are hoisted out of the loop, row loads are prefetched one block ahead (raw dtype)."""
    if row.n == 1 << max(row.n - 1, 0).bit_length():
        row.col_mask = None
    i64 = ".to(tl.int64)" if wide(plan, kernel) else ""
    ind = "        "
    hoisted = [(nid, v) for nid, v in kernel.loads if not row.deps(nid, v)[0]]
    streamed = [(nid, v) for nid, v in kernel.loads if row.deps(nid, v)[0]]
    lines = [
        f"    pid = tl.program_id(0){i64}",
        "    rows0 = tl.arange(0, BLOCK_M)[:, None]",
        "    c = tl.arange(0, BLOCK_N)[None, :]",
        f"    cmask = {whole_mask('c', row.n, 'BLOCK_N')}",
        *[row.load_line(nid, v, "    ") for nid, v in hoisted],
        "    rn = pid * BLOCK_M + rows0",
        *[row.load_line(nid, v, "    ", row="rn", var="p", convert=False) for nid, v in streamed],
        f"    for blk in range(pid, tl.cdiv({row.rows}, BLOCK_M), NUM_PROGRAMS):",
        f"{ind}r = blk * BLOCK_M + rows0",
        f"{ind}rmask = {whole_mask('r', row.rows, 'BLOCK_M')}",
        f"{ind}mask = rmask & cmask",
        *[f"{ind}v{nid} = {to_f32(f'p{nid}', plan.buffer(v.buffer).dtype)}" for nid, v in streamed],
        f"{ind}rn = r + NUM_PROGRAMS * BLOCK_M  # the next block's loads, in flight while this one is finished",
        *[row.load_line(nid, v, ind, row="rn", var="p", convert=False) for nid, v in streamed],
        *[row.node_line(nid, ind) for nid in kernel.nodes],
        *[row.store_line(nid, v, ind) for nid, v in kernel.stores],
    ]
    return lines


def _online_pairs(g: Graph, kernel: Kernel) -> dict[int, int]:
    """max node -> sum node of softmax's pattern sum(exp(y - max(y))), both in this kernel."""
    mine, pairs = set(kernel.nodes), {}
    for sid in kernel.nodes:
        s = g.node(sid)
        e = g.node(s.inputs[0]) if s.op == "sum" else None
        if e is None or e.id not in mine or e.op != "exp":
            continue
        d = g.node(e.inputs[0])
        if d.id not in mine or d.op != "sub" or d.inputs[1] not in mine:
            continue
        m = g.node(d.inputs[1])
        if m.op == "max" and m.inputs[0] == d.inputs[0]:
            pairs[m.id] = sid
    return pairs


def _online_loop(row: _Row, mid: int, sid: int, y: int, loop: list[str], cone: list[str]) -> list[str]:
    """One pass for max(y) and sum(exp(y - max)): a running max and a compensated (Kahan) running sum of the
    blocks' sums, both rescaled when the max grows. Each block's exponents are y * log2(e) - M with M the
    rounded max * log2(e) (one FFMA, `row_shifted`); the rescale uses the same rounded M's, so every block's sum
    ends with the final M's shift, the one the output pass divides by. Each M is `_mul_rn`, a product the compiler
    cannot contract: written m_old * log2(e) - m_new * log2(e), one product went into an FMA on the H200 (unrounded,
    unlike the block's), and inputs ~ N(0, 1000), where an M's half ulp is 2.4e-4, came out at 6.4e-5 relative
    error against eager's 1e-8 (the interpreter contracts nothing and saw none of it)."""
    ind = "        "
    return [
        f'    m_run{mid} = tl.full([BLOCK_M, 1], -float("inf"), tl.float32)',
        f"    l_run{sid} = tl.zeros([BLOCK_M, 1], dtype=tl.float32)",
        f"    l_comp{sid} = tl.zeros([BLOCK_M, 1], dtype=tl.float32)",
        *loop, *cone,
        f'{ind}y = tl.where(cmask, v{y}, -float("inf"))',
        f"{ind}m_new = tl.maximum(m_run{mid}, tl.max(y, axis=1, keep_dims=True))",
        f'{ind}m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)  # rows all -inf so far: no NaN',
        f"{ind}alpha = _exp2(_mul_rn(m_run{mid}, {LOG2E!r}) - _mul_rn(m_safe, {LOG2E!r}))  # the blocks' shifts",
        f"{ind}old = l_run{sid} * alpha",
        f"{ind}part = tl.sum(_exp2(tl.fma(y, {LOG2E!r}, -_mul_rn(m_safe, {LOG2E!r}))), axis=1, keep_dims=True)"
        f" - l_comp{sid} * alpha",
        f"{ind}l_run{sid} = old + part",
        f"{ind}l_comp{sid} = (l_run{sid} - old) - part  # what the add dropped",
        f"{ind}m_run{mid} = m_new",
        f"    v{mid} = m_run{mid}",
        f"    v{sid} = l_run{sid} - l_comp{sid}",
    ]


def _looped(row: _Row, plan: Plan, kernel: Kernel) -> list[str]:
    g, ind = plan.graph, "        "
    lines = _prologue(row, kernel, plan, "BLOCK_N")
    loop = [f"    for c0 in range(0, {row.n}, BLOCK_N):", f"{ind}c = c0 + cols",
            f"{ind}cmask = {whole_mask('c', row.n, 'BLOCK_N')}",
            f"{ind}mask = rmask & cmask"]
    lines += [row.load_line(nid, v, "    ") for nid, v in kernel.loads if row.is_stat(nid)]

    def cone_lines(roots: list[int], last: bool = False) -> list[str]:
        """The cone's loads and nodes inside a column loop; loads of row data evict_last (a later loop reads them
        again), evict_first in the `last` loop; per-column operands (weights) evict_last."""
        out = []
        for x in row.cone(roots):
            if x in row.loads:
                again = not last or not row.deps(x, row.loads[x])[0]
                out.append(row.load_line(x, row.loads[x], ind, evict="evict_last" if again else "evict_first"))
            else:
                out.append(row.node_line(x, ind))
        return out

    online = _online_pairs(g, kernel)
    for nid in kernel.nodes:
        if not row.is_stat(nid) or nid in online.values():
            continue
        n = g.node(nid)
        if nid in online:  # softmax's max and sum in one pass over the row
            lines += _online_loop(row, nid, online[nid], n.inputs[0], loop, cone_lines([n.inputs[0]]))
            continue
        if n.op not in _REDUCE_INIT:
            lines.append(row.node_line(nid, "    "))
            continue
        x = n.inputs[0]
        acc = f"acc{nid}"
        lines.append(f"    {acc} = tl.full([BLOCK_M, BLOCK_N], {_REDUCE_INIT[n.op]}, tl.float32)")
        comp = f"comp{nid}"
        if n.op != "max":
            lines.append(f"    {comp} = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)")
        lines += loop + cone_lines([x])
        if n.op == "max":
            lines.append(f'{ind}{acc} = tl.maximum({acc}, tl.where(cmask, v{x}, -float("inf")))')
            lines.append(f"    v{nid} = tl.max({acc}, axis=1, keep_dims=True)")
        else:  # compensated (Kahan) running sums per lane where a lane sums many blocks (COMPENSATE)
            lines += [f"{ind}if COMPENSATE:",
                      f"{ind}    y = tl.where(cmask, v{x}, 0.0) - {comp}",
                      f"{ind}    t = {acc} + y",
                      f"{ind}    {comp} = (t - {acc}) - y  # what the add dropped",
                      f"{ind}    {acc} = t",
                      f"{ind}else:",
                      f"{ind}    {acc} = {acc} + tl.where(cmask, v{x}, 0.0)"]
            scale = f" / {float(row.n)!r}" if n.op == "mean" else ""
            lines.append(f"    v{nid} = tl.sum({acc} - {comp}, axis=1, keep_dims=True){scale}")
    lines += [row.store_line(nid, v, "    ") for nid, v in kernel.stores if row.is_stat(nid)]
    full = [(nid, v) for nid, v in kernel.stores if not row.is_stat(nid)]
    if full:
        lines += loop + cone_lines([nid for nid, _ in full], last=True)
        lines += [row.store_line(nid, v, ind) for nid, v in full]
    return lines


def generate(plan: Plan, kernel: Kernel, target: CodegenTarget) -> KernelSource:
    row = _Row(plan, kernel)
    block_n = 1 << max(row.n - 1, 0).bit_length()
    looped = block_n > target.max_row_block
    body = _looped(row, plan, kernel) if looped else _persistent(row, plan, kernel)
    form = "looped" if looped else "persistent"
    args = ", ".join(kernel.buffers())
    head = ["@triton.jit",
            f"def {kernel.name}({args}, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr"
            + (", COMPENSATE: tl.constexpr):" if looped else "):"),
            f'    """Row reduction ({form}): {row.rows} rows of {row.n}; one program = BLOCK_M rows."""']
    lines = head + body
    if not looped:
        lines += ["", "", "@triton.jit",
                  f"def {kernel.name}_loop({args}, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, "
                  "COMPENSATE: tl.constexpr):",
                  f'    """Row reduction (looped twin): {row.rows} rows of {row.n} in column blocks of BLOCK_N; one '
                  f'program = BLOCK_M rows."""'] + _looped(_Row(plan, kernel), plan, kernel)
        lines += ["", "", "@triton.jit",
                  f"def {kernel.name}_rows({args}, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, "
                  "NUM_PROGRAMS: tl.constexpr):",
                  f'    """Row reduction (persistent, row loop): {row.rows} rows of {row.n}; NUM_PROGRAMS programs '
                  f'walk blocks of BLOCK_M rows."""'] + _row_loop(_Row(plan, kernel), plan, kernel)
    text = header(f"row-reduction kernel {kernel.name}", target) + "\n".join(lines) + "\n"
    sizes = {"rows": row.rows, "cols": row.n, "block_n": block_n}
    return KernelSource(kernel, kernel.name, text, kernel.buffers(), sizes, form)
