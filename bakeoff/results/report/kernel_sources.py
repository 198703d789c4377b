"""The kernels each backend generated, read from its artifacts: name, what it fuses, where its source is.

One parser per kind of artifact: Inductor's output code (`triton_poi_fused_…`, `cpp_fused_…`, extern calls),
tritongen's kernel table and partition, XLA's optimized HLO (fusions, custom calls), IREE's dispatch
sources (`…_dispatch_N_…`), and an ONNX node list. Each returns `Generated` entries; a parser given text it
does not recognise returns none (the report then lists the artifacts without a kernel table).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Generated:
    """A kernel (or a call into a library) in a backend's generated code. `artifact` and `line` (1-based)
    point at its source; `fused` says which graph ops it computes; `facts` holds registers, shared memory,
    IR sizes and its launch config where the backend records them; `aliases` are other names it runs under;
    `calls_library` marks a call into a library (cuBLAS, cuDNN, an ONNX Runtime op) rather than generated code,
    whose kernels are named by that library."""

    name: str
    origin: str
    fused: str = ""
    artifact: str | None = None
    line: int | None = None
    facts: str = ""
    aliases: tuple[str, ...] = field(default_factory=tuple)
    calls_library: bool = False


def line_of(text: str, index: int) -> int:
    """1-based line number of character `index` in `text`."""
    return text.count("\n", 0, index) + 1


# --- Inductor ------------------------------------------------------------------------------------------------
_INDUCTOR_DEF = re.compile(r"^(?P<name>\w+) = async_compile\.(?P<how>triton|cpp_pybinding|cpp|cuda|halide)\(",
                           re.M)
_INDUCTOR_FUSED = re.compile(r"^(?:triton_(?:poi|red|per|tem|for|spl|mm)|cpp)_fused_(?P<ops>.+?)_\d+$")
_SOURCE_NODES = re.compile(r"#\s*Topologically Sorted Source Nodes: \[(?P<nodes>[^\]]*)\]"
                           r"(?:, Original ATen: \[(?P<aten>[^\]]*)\])?")
_EXTERN = re.compile(r"extern_kernels\.(?P<fn>\w+)\(")
# An ATen op Inductor did not lower and calls as it is (a fallback: attention, a custom op), in call().
_FALLBACK = re.compile(r"(?<![\w.])(?:torch\.ops\.)?aten\.(?P<op>\w+)\.(?P<overload>\w+)\(")


def _origin_comment(code: str, start: int, end: int) -> str:
    """'aten.add, aten.mul (nodes add, mul)' from the last source-nodes comment in code[start:end]."""
    found = list(_SOURCE_NODES.finditer(code, start, end))
    if not found:
        return ""
    m = found[-1]
    return (m.group("aten") or "").strip() + (f" (nodes {m.group('nodes').strip()})" if m.group("nodes") else "")


def inductor_kernels(code: str, artifact: str = "output_code.py") -> list[Generated]:
    """Triton / C++ kernels defined in Inductor's output code, and the extern (ATen/cuBLAS) calls it makes."""
    out = []
    for m in _INDUCTOR_DEF.finditer(code):
        name = m.group("name")
        prev_blank = code.rfind("\n\n", 0, m.start())
        fused = _origin_comment(code, max(prev_blank, 0), m.start())
        if not fused:  # the comment sits before the kernel's call in call() on some versions
            call = re.search(rf"^[ \t]*{re.escape(name)}(?:\.run)?\(", code[m.end():], re.M)
            if call:
                at = m.end() + call.start()
                fused = _origin_comment(code, max(code.rfind("\n\n", 0, at), 0), at)
        if not fused and (f := _INDUCTOR_FUSED.match(name)):
            fused = f.group("ops")
        how = {"cpp_pybinding": "C++", "cpp": "C++", "triton": "Triton"}.get(m.group("how"), m.group("how"))
        out.append(Generated(name, f"Inductor → {how}", fused, artifact, line_of(code, m.start())))
    for m in _EXTERN.finditer(code):
        if any(g.name == f"extern_kernels.{m.group('fn')}" for g in out):
            continue
        out.append(Generated(f"extern_kernels.{m.group('fn')}", "Inductor → ATen extern (cuBLAS for mm)",
                             m.group("fn"), artifact, line_of(code, m.start()), calls_library=True))
    call = re.search(r"^def call\(", code, re.M)
    for m in _FALLBACK.finditer(code, call.start() if call else len(code)):
        name = f"aten.{m.group('op')}"
        if not any(g.name == name for g in out):
            out.append(Generated(name, "Inductor → ATen fallback", f"{name}.{m.group('overload')}", artifact,
                                 line_of(code, m.start()), calls_library=True))
    return out


# --- tritongen -----------------------------------------------------------------------------------------------
_GRAPH_NODE = re.compile(r"^%(?P<id>\d+) = (?P<op>\w+)\(", re.M)


def _kb(n: Any) -> str:
    return f"{n / 1024:.1f} kB" if isinstance(n, int | float) and n >= 1024 else f"{n} B"


def tritongen_kernels(summary: dict[str, Any], texts: dict[str, str]) -> list[Generated]:
    """tritongen's kernels from the record's `artifacts.kernels` (config, registers, spills, shared memory, IR
    sizes) with the ops each computes (partition.txt) and its source file `<kernel>.py`."""
    ops = {m.group("id"): m.group("op") for m in _GRAPH_NODE.finditer(texts.get("graph", ""))}
    partition = texts.get("partition.txt", "")
    out = []
    for fn, k in (summary.get("kernels") or {}).items():
        computes = re.search(rf"^{re.escape(fn)} \[.*\n\s+computes: (?P<ops>.*)$", partition, re.M)
        nodes = ", ".join(f"{ops.get(str(n), '?')} %{n}" for n in k.get("source_nodes") or [])
        fused = (computes.group("ops") if computes else "") + (f" (graph nodes {nodes})" if nodes else "")
        facts = []
        for key, label in (("n_regs", "regs"), ("n_spills", "spills")):
            if k.get(key) is not None:
                facts.append(f"{label} {k[key]}")
        if k.get("shared_bytes") is not None:
            facts.append(f"smem {_kb(k['shared_bytes'])}")
        facts += [f"{ir.upper()} {_kb(k[f'{ir}_bytes'])}" for ir in ("ttir", "ttgir", "llir", "ptx")
                  if k.get(f"{ir}_bytes")]
        if not facts:  # no compiled kernel (the interpreter): say so rather than show nothing
            facts.append(texts.get("ir_note.txt", "").strip() or "no registers, shared memory or IR recorded")
        if k.get("config"):
            facts.append(" ".join(f"{a}={b}" for a, b in k["config"].items()))
        if k.get("variant"):
            facts.append(str(k["variant"]))
        source = texts.get(f"{fn}.py", "")
        at = re.search(rf"^def {re.escape(fn)}\(", source, re.M)
        out.append(Generated(fn, f"tritongen → Triton ({k.get('kind')})", fused.strip(),
                             f"{fn}.py" if source else None, line_of(source, at.start()) if at else None,
                             " · ".join(facts)))
    return out


# --- XLA -----------------------------------------------------------------------------------------------------
_HLO_COMPUTATION = re.compile(r"^(?P<entry>ENTRY )?%?(?P<name>[\w.\-]+) .*\{\s*$")
_HLO_INSTR = re.compile(r"^\s*(?:ROOT )?%?(?P<name>[\w.\-]+) = \S+(?: \S+)*? (?P<op>[\w\-]+)\(")
_HLO_CALLS = re.compile(r"calls=%?(?P<callee>[\w.\-]+)")
_HLO_KIND = re.compile(r"kind=(?P<kind>k\w+)")
_HLO_TARGET = re.compile(r'custom_call_target="(?P<target>[^"]+)"')
_HLO_BACKEND_KIND = re.compile(r'"kind":\s*"(?P<kind>__[\w$]+)"')  # a kCustom fusion's emitter: __triton_gemm, __cudnn$fusion
_HLO_OPNAME = re.compile(r'op_name="(?P<op>[^"]+)"')
_HLO_SKIP = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "copy"}


def sanitized(name: str) -> str:
    """An HLO instruction name as XLA names its GPU kernel ('fusion.3' -> 'fusion_3')."""
    return re.sub(r"[^\w]", "_", name.lstrip("%"))


def xla_kernels(hlo: str, artifact: str = "hlo_optimized") -> list[Generated]:
    """The fusions and custom calls of the entry computation of XLA's optimized HLO, with the ops each
    fused computation holds."""
    bodies: dict[str, list[str]] = {}
    entry: list[tuple[int, str]] = []
    current: str | None = None
    is_entry = False
    for i, line in enumerate(hlo.splitlines(), 1):
        head = _HLO_COMPUTATION.match(line)
        if head and not line.startswith(" "):
            current, is_entry = head.group("name"), bool(head.group("entry"))
            bodies[current] = []
        elif current is not None and line.startswith(" "):
            m = _HLO_INSTR.match(line)
            if m:
                bodies[current].append(m.group("op"))
                if is_entry:
                    entry.append((i, line))
    out = []
    for i, line in entry:
        m = _HLO_INSTR.match(line)
        assert m is not None
        op, name = m.group("op"), m.group("name")
        meta = _HLO_OPNAME.search(line)
        where = f" [{meta.group('op')}]" if meta else ""
        if op == "fusion":
            callee = _HLO_CALLS.search(line)
            kind = _HLO_KIND.search(line)
            inner = [o for o in dict.fromkeys(bodies.get(callee.group("callee"), []) if callee else [])
                     if o not in _HLO_SKIP]
            emitter = _HLO_BACKEND_KIND.search(line)
            how = ", ".join(x for x in (kind.group("kind") if kind else "?", emitter.group("kind") if emitter else "") if x)
            library_call = bool(emitter) and "cudnn" in emitter.group("kind")  # cuDNN's kernels, not XLA's
            out.append(Generated(name, f"XLA fusion ({how})",
                                 ", ".join(inner) + where + (f" [{emitter.group('kind')}]" if library_call else ""),
                                 artifact, i, aliases=(sanitized(name),), calls_library=library_call))
        elif op == "custom-call":
            target = _HLO_TARGET.search(line)
            out.append(Generated(name, f"XLA custom call {target.group('target') if target else ''}".strip(),
                                 (target.group("target") if target else "") + where, artifact, i,
                                 aliases=(sanitized(name),), calls_library=True))
    return out


# --- IREE ----------------------------------------------------------------------------------------------------
_IREE_EXPORT = re.compile(r"hal\.executable\.export public @(?P<name>[\w$.\-]+)")
_IREE_OP = re.compile(r"\b(?P<op>(?:linalg|iree_linalg_ext|linalg_ext)\.[a-z_]+)\b")
_IREE_LOC = re.compile(r'loc\(callsite\("<stdin>":(?P<line>\d+):')


def iree_kernels(mlir: str, artifact: str = "dispatches.mlir") -> list[Generated]:
    """Each dispatch's export, the linalg ops in its executable, and the StableHLO lines it came from."""
    exports = list(_IREE_EXPORT.finditer(mlir))
    out = []
    for k, m in enumerate(exports):
        end = mlir.find("// ---- ", m.end())
        body = mlir[m.end(): end if end >= 0 else len(mlir)]
        ops = list(dict.fromkeys(x.group("op") for x in _IREE_OP.finditer(body)))
        lines = sorted({int(x.group("line")) for x in _IREE_LOC.finditer(body)})
        fused = ", ".join(ops) + (f" (StableHLO lines {', '.join(map(str, lines[:8]))})" if lines else "")
        out.append(Generated(m.group("name"), "IREE dispatch", fused, artifact, line_of(mlir, m.start())))
    return out


# --- ONNX ----------------------------------------------------------------------------------------------------
_ONNX_NODE = re.compile(r"^#(?P<i>\d+) (?P<op>[\w.]+) '(?P<name>[^']*)' (?P<io>\(.*?\) -> \(.*?\))", re.M)


def onnx_nodes(text: str, artifact: str, origin: str) -> list[Generated]:
    """One entry per node of an ONNX node list (workloads/onnx_text.py); ONNX Runtime runs a kernel per node."""
    return [Generated(m.group("name") or f"node {m.group('i')}", origin, f"{m.group('op')} {m.group('io')}",
                      artifact, line_of(text, m.start()), aliases=(m.group("op"),), calls_library=True)
            for m in _ONNX_NODE.finditer(text)]
