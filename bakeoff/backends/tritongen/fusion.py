"""Stage 1, fusion: partition a bound graph into kernels and decide where every value lives.

Rules (greedy, in topological order):
- matmul starts a `matmul` kernel; sdpa an `attention` kernel (flash attention, online softmax);
- a last-axis reduction joins the pointwise/row kernel that computes its input over the same rows, else starts
  a `rowreduce` kernel: so LayerNorm(+GELU), RMSNorm and softmax are one kernel each;
- a pointwise op joins the kernel of one of its inputs when the shapes agree (a matmul's epilogue, a row
  kernel's prologue/epilogue, a pointwise chain) and no dependency cycle between kernels follows, else starts a
  `pointwise` kernel;
- reshape/transpose/broadcast are folded into strided views; a value read only through one transpose is written
  in that transposed order (so attention's head split and merge cost nothing); a reshape no view can express
  gets a `copy` kernel.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from bakeoff.workloads.ir import Graph
from bakeoff.workloads.ops import BINARY, LAYOUT, REDUCE, UNARY

from bakeoff.backends.tritongen.expand import expand
from bakeoff.backends.tritongen.kernel_plan import Buffer, Kernel, Plan
from bakeoff.backends.tritongen.views import View, broadcast_view, contiguous, contiguous_strides, permute_view, reshape_view
from bakeoff.backends.tritongen.symdim import dims


@dataclass
class _Group:
    kind: str
    domain: tuple[int, ...]
    nodes: list[int] = field(default_factory=list)
    anchor: int | None = None
    deps: set[int] = field(default_factory=set)


class _Partitioner:
    """Greedy grouping over the expanded graph; `plan()` turns the groups into buffers and kernels."""

    def __init__(self, graph: Graph) -> None:
        self.g = graph
        self.groups: list[_Group] = []
        self.group_of: dict[int, int] = {}

    # -- grouping -------------------------------------------------------------------------------------
    def source_of(self, nid: int) -> int:
        """The node under a chain of layout ops."""
        n = self.g.node(nid)
        while n.op in LAYOUT:
            n = self.g.node(n.inputs[0])
        return n.id

    def reaches(self, a: int, b: int) -> bool:
        """Whether group `a` depends (transitively) on group `b`."""
        stack, seen = [a], set()
        while stack:
            x = stack.pop()
            if x == b:
                return True
            if x not in seen:
                seen.add(x)
                stack.extend(self.groups[x].deps)
        return False

    def memory_deps(self, nid: int, gi: int | None) -> set[int] | None:
        """Groups that node `nid` in group `gi` would read from memory; None if that makes a cycle."""
        out: set[int] = set()
        for i in self.g.node(nid).inputs:
            if self.g.node(i).op == "const" or (gi is not None and self.group_of.get(i) == gi):
                continue
            pg = self.group_of.get(self.source_of(i))
            if pg is None:
                continue
            if gi is not None and (pg == gi or self.reaches(pg, gi)):
                return None
            out.add(pg)
        return out

    def new_group(self, nid: int, kind: str, domain: tuple[int, ...], anchor: int | None = None) -> None:
        deps = self.memory_deps(nid, None) or set()
        self.groups.append(_Group(kind, domain, [nid], anchor, deps))
        self.group_of[nid] = len(self.groups) - 1

    def join(self, nid: int, gi: int, deps: set[int]) -> None:
        grp = self.groups[gi]
        grp.nodes.append(nid)
        grp.deps |= deps
        self.group_of[nid] = gi
        for h in sorted(deps):  # a pointwise producer nobody else reads is pulled in (one pass, not two)
            other = self.groups[h]
            if other.kind == "pointwise" and self.fits(gi, other.domain) and not any(
                    h in x.deps for k, x in enumerate(self.groups) if k != gi):
                grp.nodes = sorted(grp.nodes + other.nodes)
                grp.deps = (grp.deps | other.deps) - {h}
                for m in other.nodes:
                    self.group_of[m] = gi
                other.kind, other.nodes, other.deps = "dead", [], set()

    def fits(self, gi: int, shape: tuple[int, ...]) -> bool:
        grp = self.groups[gi]
        if grp.kind in ("pointwise", "matmul"):
            return shape == grp.domain
        if grp.kind == "rowreduce":
            return shape == grp.domain or shape == grp.domain[:-1] + (1,)
        return False

    def place(self, nid: int) -> None:
        n = self.g.node(nid)
        shape = dims(n.shape)
        if n.op in ("input", "const") or n.op in LAYOUT:
            return
        if n.op == "matmul":
            return self.new_group(nid, "matmul", shape, anchor=nid)
        if n.op == "sdpa":
            return self.new_group(nid, "attention", shape, anchor=nid)
        if n.op in REDUCE:
            x = n.inputs[0]
            gi = self.group_of.get(x)
            xshape = dims(self.g.node(x).shape)
            if gi is not None and self.groups[gi].kind in ("pointwise", "rowreduce") \
                    and self.groups[gi].domain == xshape:
                self.groups[gi].kind = "rowreduce"
                return self.join(nid, gi, set())
            return self.new_group(nid, "rowreduce", xshape)
        if n.op in UNARY or n.op in BINARY:
            for i in n.inputs:
                gi = self.group_of.get(i)
                if gi is None or not self.fits(gi, shape):
                    continue
                deps = self.memory_deps(nid, gi)
                if deps is not None:
                    return self.join(nid, gi, deps)
            return self.new_group(nid, "pointwise", shape)
        raise NotImplementedError(f"tritongen: no fusion rule for op {n.op!r}")

    # -- buffers and views ----------------------------------------------------------------------------
    def plan(self, source: Graph, origin: dict[int, int]) -> Plan:
        g = self.g
        views = _Views(g)
        for idx, n in enumerate(g.inputs):
            buf = Buffer(f"in_{n.attr('name')}", tuple(n.shape), n.dtype, "input", idx)
            views.add(buf, n.id, contiguous(buf.name, buf.shape))
        stores = self._stores(views)
        kernels_raw: list[tuple[_Group, list, list]] = []
        for gi, grp in enumerate(self.groups):
            if grp.kind == "dead":
                continue
            loads: dict[int, View] = {}
            for nid in grp.nodes:
                for i in g.node(nid).inputs:
                    if g.node(i).op != "const" and self.group_of.get(i) != gi:
                        loads.setdefault(i, views.of(i))
            kernels_raw.append((grp, list(loads.items()), stores[gi]))
        out_views = []
        for o in g.outputs:
            if g.node(o).op == "const":
                raise NotImplementedError("tritongen: a graph output that is a constant")
            out_views.append(views.of(o))
        kernels_raw += views.copies
        return Plan(g, source, origin, tuple(views.buffers), _order(kernels_raw, origin), tuple(out_views))

    def _stores(self, views: "_Views") -> dict[int, list[tuple[int, View]]]:
        """Per group, the values it writes to memory (read by another group, or graph outputs), with their
        buffers added to `views`."""
        g, users = self.g, self.g.users()
        outputs = set(g.outputs)
        stores: dict[int, list[tuple[int, View]]] = {}
        for gi, grp in enumerate(self.groups):
            stores[gi] = []
            if grp.kind == "dead":
                continue
            for nid in grp.nodes:
                outside = [u for u in users[nid] if self.group_of.get(u) != gi]
                if nid not in outputs and not outside:
                    continue
                buf, view = _stored(g, nid, outside, nid in outputs)
                views.add(buf, nid, view)
                stores[gi].append((nid, view))
        return stores


def _stored(g: Graph, nid: int, outside: list[int], is_output: bool) -> tuple[Buffer, View]:
    """The buffer a group writes value `nid` to, and its view: a value read only through one transpose (and no
    graph output) is written in that order, so the transpose is a view."""
    n = g.node(nid)
    shape = dims(n.shape)
    perms = {g.node(u).attr("perm") for u in outside if g.node(u).op == "transpose"}
    only_t = outside and all(g.node(u).op == "transpose" for u in outside) and len(perms) == 1
    if only_t and not is_output:
        perm = tuple(perms.pop())
        phys = tuple(shape[p] for p in perm)
        strides = [0] * len(shape)
        for i, s in zip(perm, contiguous_strides(phys)):
            strides[i] = s
        buf = Buffer(f"t{nid}", phys, n.dtype, "temp")
        return buf, View(buf.name, shape, tuple(strides))
    buf = Buffer(f"t{nid}", shape, n.dtype, "output" if is_output else "temp")
    return buf, contiguous(buf.name, shape)


class _Views:
    """The plan's buffers and each value's memory view; layout ops become views of their input, or a copy
    kernel where strides forbid one (`copies`: (group, loads, stores) appended after the fused kernels)."""

    def __init__(self, g: Graph) -> None:
        self.g = g
        self.buffers: list[Buffer] = []
        self.views: dict[int, View] = {}
        self.copies: list[tuple[_Group, list, list]] = []

    def add(self, buf: Buffer, nid: int, view: View) -> None:
        self.buffers.append(buf)
        self.views[nid] = view

    def of(self, nid: int) -> View:
        if nid in self.views:
            return self.views[nid]
        n = self.g.node(nid)
        if n.op not in LAYOUT:
            raise NotImplementedError(f"tritongen: value %{nid} ({n.op}) has no memory view")
        src = self.of(n.inputs[0])
        shape = dims(n.shape)
        if n.op == "transpose":
            v = permute_view(src, tuple(n.attr("perm")))
        elif n.op == "broadcast":
            v = broadcast_view(src, shape)
        else:
            v = reshape_view(src, shape)
            if v is None:  # strides forbid a view: a copy kernel writes the source contiguously
                buf = Buffer(f"t{nid}", src.shape, n.dtype, "temp")
                self.buffers.append(buf)
                dst = contiguous(buf.name, src.shape)
                self.copies.append((_Group("copy", src.shape, [nid]), [(n.inputs[0], src)], [(nid, dst)]))
                v = contiguous(buf.name, shape)
        self.views[nid] = v
        return v


def _order(raw: list[tuple[_Group, list, list]], origin: dict[int, int]) -> tuple[Kernel, ...]:
    """Kernels in an order where each runs after the kernels whose buffers it reads (stable otherwise)."""
    writer = {v.buffer: k for k, (_, _, st) in enumerate(raw) for _, v in st}
    deps = [{writer[v.buffer] for _, v in ld if v.buffer in writer} - {k} for k, (_, ld, _) in enumerate(raw)]
    done: list[int] = []
    while len(done) < len(raw):
        ready = [k for k in range(len(raw)) if k not in done and deps[k] <= set(done)]
        if not ready:
            raise RuntimeError("tritongen: kernel dependencies form a cycle")
        done.append(ready[0])
    out = []
    for pos, k in enumerate(done):
        grp, loads, stores = raw[k]
        org = tuple(sorted({origin[n] for n in grp.nodes}))
        out.append(Kernel(f"k{pos}_{grp.kind}", grp.kind, tuple(grp.nodes), tuple(loads), tuple(stores),
                          grp.domain, grp.anchor, org))
    return tuple(out)


def fuse(graph: Graph) -> Plan:
    """Stage 1: the fusion plan of a bound graph (print `plan.text()` to see the partition)."""
    ex = expand(graph)
    p = _Partitioner(ex.graph)
    for n in ex.graph.nodes:
        p.place(n.id)
    return p.plan(graph, ex.origin)
