"""Template: a pointwise kernel over a flat index (1-D blocks of BLOCK elements), strided/broadcast loads."""
from __future__ import annotations

import math

from bakeoff.backends.tritongen.source import header, KernelSource, CodegenTarget, to_f32, whole_mask, wide
from bakeoff.backends.tritongen.exprs import pointwise_expr
from bakeoff.backends.tritongen.indexing import linear_offset
from bakeoff.backends.tritongen.kernel_plan import Kernel, Plan
from bakeoff.backends.tritongen.views import broadcast_view


def generate(plan: Plan, kernel: Kernel, target: CodegenTarget) -> KernelSource:
    g = plan.graph
    dom = kernel.domain
    numel = math.prod(dom)
    params = kernel.buffers()
    lines = ["@triton.jit",
             f"def {kernel.name}({', '.join(params)}, BLOCK: tl.constexpr):",
             f'    """{kernel.kind}: {numel} elements of shape {list(dom)}; one program = BLOCK elements."""',
             "    pid = tl.program_id(0)" + (".to(tl.int64)" if wide(plan, kernel) else ""),
             "    i = pid * BLOCK + tl.arange(0, BLOCK)",
             f"    mask = {whole_mask('i', numel, 'BLOCK')}"]
    for nid, view in kernel.loads:
        v = broadcast_view(view, dom) if kernel.kind != "copy" else view
        off = linear_offset("i", v.shape, v.strides) + (f" + {v.offset}" if v.offset else "")
        load = f"tl.load({v.buffer} + {off}, mask=mask, other=0.0)"
        lines.append(f"    v{nid} = {to_f32(load, plan.buffer(v.buffer).dtype)}")
    row = f"((i // {dom[-1]}) % {dom[-2]})" if len(dom) >= 2 else None
    col = f"(i % {dom[-1]})" if dom else None
    for nid in kernel.nodes:
        n = g.node(nid)
        args = [pointwise_arg(g, i) for i in n.inputs]
        lines.append(f"    v{nid} = {pointwise_expr(n, args, row, col)}")
    for nid, view in kernel.stores:
        off = linear_offset("i", view.shape, view.strides) + (f" + {view.offset}" if view.offset else "")
        lines.append(f"    tl.store({view.buffer} + {off}, v{nid}.to({view.buffer}.dtype.element_ty), mask=mask)")
    text = header(f"{kernel.kind} kernel {kernel.name}", target) + "\n".join(lines) + "\n"
    return KernelSource(kernel, kernel.name, text, params, {"numel": numel})


def pointwise_arg(g, nid: int) -> str:
    """A node's value inside a kernel: a literal for constants, else its variable."""
    from bakeoff.backends.tritongen.exprs import literal

    n = g.node(nid)
    return literal(n.attr("value")) if n.op == "const" else f"v{nid}"
