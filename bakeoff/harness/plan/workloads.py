"""Config -> workloads: each entry of a validated config resolved against the suite (or parsed from its
expression) into a graph with the config's inits applied, the shapes to run it at, its dtypes and input
files; errors name the entry's line. plan/cases.py turns them into cases.
"""
from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from bakeoff.backends.options import clip
from bakeoff.workloads.decompose import decompose
from bakeoff.workloads.expr import ExprError, parse_expr
from bakeoff.workloads.ir import Graph, IRError, bind, bind_dim, dim_names
from bakeoff.workloads.suite import every_workload

from bakeoff.harness.config.inputs import resolve_inits
from bakeoff.harness.config.schema import MAX_DIM, MAX_INPUT_BYTES, Config, WorkloadConfig
from bakeoff.harness.config.yaml_lines import ConfigError, LocatedYaml


class ResolvedWorkload(BaseModel):
    """A workload with its graph and the dim bindings to run it at, each with a label."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    name: str
    graph: Graph  # with the config's inits applied
    shapes: list[tuple[str, dict[str, int]]]  # (preset label or "custom", dims)
    dtypes: list[str] = ["float32"]
    input_files: dict[str, str] = {}  # SHA-256 -> absolute path of each file an input is read from
    grad: bool = False  # the training step (forward + backward), not the forward alone
    # The swept dim and its values in serving order (each shape's dims hold the first value), or None.
    sweep: tuple[str, tuple[int, ...]] | None = None


def _check_dims(graph: Graph, dims: dict[str, int], where: LocatedYaml, path: tuple) -> None:
    """`dims` names exactly the graph's dims, each a positive integer."""
    needed = set().union(*(dim_names(n.shape) for n in graph.inputs))
    unknown = [k for k in dims if k not in needed]
    if unknown:  # a typo (`n` for `N`), or a dim of another workload: it would only rename the case
        raise where.error(path + (unknown[0],), f"{clip(unknown[0], 40)!r} is not a dim of this workload "
                                                f"(its dims: {', '.join(sorted(needed)) or 'none'})")
    missing = sorted(needed - set(dims))
    if missing:
        raise where.error(path, f"dims {missing} are not given (needed: {sorted(needed)})")
    for k, v in dims.items():
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0 or v > MAX_DIM:
            raise where.error(path + (k,), f"dim {k}={v!r} must be a positive integer <= {MAX_DIM}")


def _check_shape(graph: Graph, dims: dict[str, int], where: LocatedYaml, path: tuple) -> None:
    _check_dims(graph, dims, where, path)
    total = 0
    for n in graph.inputs:
        numel = math.prod(bind_dim(d, dims) for d in n.shape)
        total += numel * 8
    limit = f"(limit {MAX_INPUT_BYTES / 2**30:.0f} GiB): shape too large"
    if total > MAX_INPUT_BYTES:
        raise where.error(path, f"inputs would take {total / 2**30:.1f} GiB in float64 {limit}")
    # Every node's output too (a matmul or a broadcast can be far bigger than its inputs), symbolic first,
    # then after decomposition (the reference evaluates the decomposed graph, e.g. attention's scores).
    try:
        for n in graph.nodes:
            nbytes = math.prod(bind_dim(d, dims) for d in n.shape) * 8
            if nbytes > MAX_INPUT_BYTES:
                raise where.error(path, f"node %{n.id} ({n.op}) output would take {nbytes / 2**30:.1f} GiB in "
                                        f"float64 {limit}")
        bound = bind(graph, dims, "float32")
    except IRError as exc:
        raise where.error(path, str(exc)) from None
    try:
        nodes = decompose(bound).nodes
    except IRError:  # a graph the reference cannot decompose fails in its worker, with the reason
        return
    for n in nodes:
        nbytes = n.numel * 8
        if nbytes > MAX_INPUT_BYTES:
            raise where.error(path, f"the float64 reference's intermediate {n.op} output would take "
                                    f"{nbytes / 2**30:.1f} GiB {limit}")


def _sweep_of(w: WorkloadConfig, graph: Graph, where: LocatedYaml, path: tuple,
              preset: str | None) -> tuple[str, tuple[int, ...]] | None:
    """The entry's (dim, values) at `preset` (None: an entry with `shapes`), its dim checked against the graph's."""
    if w.sweep is None:
        return None
    needed = set().union(*(dim_names(n.shape) for n in graph.inputs))
    if w.sweep.dim not in needed:
        raise where.error(path + ("sweep", "dim"), f"{clip(w.sweep.dim, 40)!r} is not a dim of this workload "
                                                   f"(its dims: {', '.join(sorted(needed)) or 'none'})")
    return w.sweep.dim, tuple(w.sweep.points_for(preset))


def _swept(graph: Graph, dims: dict[str, int], sweep: tuple[str, tuple[int, ...]] | None, where: LocatedYaml,
           path: tuple) -> dict[str, int]:
    """A shape's dims, checked as `_check_shape` does; for a sweep, at its largest value (the size limits) and
    at each other value (every dim positive), returned with the swept dim at the first value."""
    if sweep is None:
        _check_shape(graph, dims, where, path)
        return dims
    dim, values = sweep
    _check_shape(graph, dims | {dim: max(values)}, where, path)
    for v in values:
        _check_dims(graph, dims | {dim: v}, where, path)
    return dims | {dim: values[0]}


def _check_uses_inputs(graph: Graph, where: LocatedYaml, path: tuple) -> None:
    """An inline expression's output depends on its inputs, computes something, and every declared input is
    used: `1.0 + 2.0` is a constant and `x` an input (no case can time or check either), an unused input is a
    typo or a leftover."""
    used, todo = set(), list(graph.outputs)
    while todo:
        node = graph.node(todo.pop())
        if node.id not in used:
            used.add(node.id)
            todo.extend(node.inputs)
    names = [n.attr("name") for n in graph.inputs if n.id in used]
    if not names:
        raise where.error(path, "the expression uses none of its inputs: it is a constant, nothing to benchmark")
    out = graph.node(graph.outputs[0])
    if out.op == "input":   # `x`: every backend would hand the input back, timing a call that computes nothing
        raise where.error(path, f"the expression is input {clip(out.attr('name'), 40)!r} itself: nothing is "
                                "computed, nothing to benchmark")
    unused = [n.attr("name") for n in graph.inputs if n.id not in used]
    if unused:
        raise where.error(path, f"input {clip(unused[0], 40)!r} is declared but the expression does not use it")


def dim_order(graph: Graph, presets: dict[str, dict[str, int]]) -> list[str]:
    """The order a workload's dims are written in case ids: its first preset's, then first use in the
    graph's inputs. So one shape always gets one case id, however its keys were ordered in the YAML."""
    order = list(next(iter(presets.values()), {}))
    for n in graph.inputs:
        order += [name for d in n.shape if isinstance(d, str) for name in d.split("*")
                  if not name.isdigit() and name not in order]
    return order


def _ordered(dims: dict[str, int], order: list[str]) -> dict[str, int]:
    return {k: dims[k] for k in order if k in dims} | dims


def _no_preset(w: WorkloadConfig, label: str, presets: dict, cfg: Config, where: LocatedYaml, path: tuple,
               device: str) -> ConfigError:
    """The error of entry `w` run at a preset `label` it lacks, blamed on what chose that preset: the entry's
    own `preset`, else the config's `preset` line, else --preset (a preset neither the config's nor its
    `auto` one on `device`, as plan/from_config.py resolves it); an `auto` preset the entry lacks is the entry's."""
    what = (f"{clip(label, 40)!r} is not a preset of workload {w.name} ({', '.join(presets) or 'it has none'})"
            + ("; give `shapes` or `presets`" if w.expr else ""))
    if w.preset:
        return where.error(path + ("preset",), what)
    own = cfg.preset if cfg.preset != "auto" else ("cpu" if device == "cpu" else "gpu")
    if label != own:
        return ConfigError(where.file, None, "preset", f"--preset {what}")
    return where.error(("preset",) if cfg.preset != "auto" else path, what)


def default_dtypes(device: str) -> list[str]:
    """The dtypes of a config that names none: float32 on the CPU, bfloat16 on CUDA."""
    return ["float32"] if device.split(":")[0] == "cpu" else ["bfloat16"]


def resolve_workloads(cfg: Config, where: LocatedYaml, preset: str, device: str = "cpu") -> list[ResolvedWorkload]:
    """Turn each workload entry into a graph plus shapes and dtypes; errors name the entry's line."""
    suite = every_workload()
    out = []
    for i, w in enumerate(cfg.workloads):
        path: tuple = ("workloads", i)
        if w.expr is not None:
            if w.name in suite:  # its records would share the built-in's series in compare and the dashboard
                raise where.error(path + ("name",), f"{w.name!r} is a built-in workload; give this expr its own name")
            try:
                graph = parse_expr(w.expr, w.inputs or {}, w.name)
            except ExprError as exc:
                raise where.error(path + ("expr",), str(exc)) from None
            _check_uses_inputs(graph, where, path + ("expr",))
            presets = w.presets or {}
        elif w.name in suite:
            graph, presets = suite[w.name].graph, {**suite[w.name].presets, **(w.presets or {})}
        else:
            raise where.error(path + ("name",), f"unknown workload {w.name!r}; built-in: {', '.join(suite)}")
        for label, dims in (w.presets or {}).items():   # every preset the entry defines, used or not
            _check_dims(graph, dict(dims), where, path + ("presets", label))
        if w.shapes and w.preset:   # the preset would pick neither the shapes nor a sweep's values
            raise where.error(path + ("preset",), f"`preset` and `shapes` both given: the entry runs at its shapes, "
                                                  f"so preset {clip(w.preset, 40)!r} would be ignored; give one")
        order = dim_order(graph, presets)
        sweep = _sweep_of(w, graph, where, path, None if w.shapes else (w.preset or preset))
        if w.shapes:
            shapes, seen = [], {}
            for j, s in enumerate(w.shapes):
                s = _swept(graph, dict(s), sweep, where, path + ("shapes", j))
                key = tuple(sorted(s.items()))
                if key in seen:
                    raise where.error(path + ("shapes", j), f"this shape is listed twice (item {seen[key]} is "
                                                            "the same dims): it would be measured twice")
                seen[key] = j
                shapes.append(("custom", _ordered(dict(s), order)))
        else:
            label = w.preset or preset
            if label not in presets:
                raise _no_preset(w, label, presets, cfg, where, path, device)
            dims = _swept(graph, dict(presets[label]), sweep, where, path)
            shapes = [(label, _ordered(dims, order))]
        dtypes = list(w.dtypes or cfg.dtypes or default_dtypes(device))
        every = [d for _, d in shapes] if sweep is None else [d | {sweep[0]: v} for _, d in shapes for v in sweep[1]]
        graph, files = resolve_inits(w.init, graph, every, dtypes, where, path)
        if w.grad and sweep is not None:
            raise where.error(path + ("grad",), "grad: true with a sweep is not supported: a sweep serves the "
                                                "forward; list the training step as its own entry")
        out.append(ResolvedWorkload(name=w.name, graph=graph, shapes=shapes, dtypes=dtypes, input_files=files,
                                    grad=w.grad, sweep=sweep))
    # One entry per workload and mode: the forward and the training step of a workload may both be listed.
    names = [(w.name, w.grad) for w in out]
    for j, key in enumerate(names):
        if key in names[:j]:
            raise where.error(("workloads", j), f"workload {key[0]!r}{' with grad: true' if key[1] else ''} appears "
                                                f"twice (first as item {names.index(key)}); give one entry several "
                                                "`shapes`")
    return out
