"""IREE's fused attention for bakeoff's StableHLO: each `bakeoff_sdpa` function becomes `iree_linalg_ext.attention`.

StableHLO has no attention op, so JAX's decomposed attention (`lower_jax._sdpa`: matmul, scale, causal mask,
softmax, matmul) reaches IREE as separate dispatches: on CUDA the scores QK^T are written to memory
(B*H*L*S elements), read by a softmax dispatch, written again and read by the PV matmul. IREE's own attention
op (`iree_linalg_ext.attention`, the op torch-mlir's `scaled_dot_product_attention` is converted to by
iree-compile's torch input) is compiled as one flash-attention style dispatch (online softmax over K/V tiles,
the scores kept on chip). `lower_jax` emits the decomposed attention as its own function,
`func.func private @bakeoff_sdpa...(q, k, v)`; `fuse_attention` replaces that function's body by the
attention op in the form the torch route produces: Q (..., L, E), K (..., S, E), V (..., S, Ev), a scalar
scale, and for a causal attention an additive mask (0 where key j <= query i, -inf elsewhere) written as a
`linalg.generic` that iree-compile fuses into the attention dispatch.

Routes (`IreeOptions.attention`): "fused" always where the function is found, "decomposed" never, "auto"
(default) the route measured faster on the device: decomposed, in every dtype. iree-compile 3.13 configures a
bf16/f16 attention for CUDA with tensor cores (VectorDistribute, NV_MMA_SYNC_F32_16x8x16) but splits the head
dim into four 32-wide tiles (QK^T computed four times) and skips no fully masked causal block, and an f32 one
without tensor cores (no f32 MMA intrinsic on the CUDA target: one query row per workgroup). On the H200
(8 x 32 x 4096 x 128 causal, CUPTI span) the fused kernel took 43.4 ms in bf16 against the decomposed form's
33.5 (attn_block 28.2 against 23.2) and 2669 ms in fp32 against 556. Seen from the host the decomposed form's
call is slower (64 ms bf16; the time outside its kernels' span is likely the 8.6 GB score buffer's allocation
each call, not checked), the fused one's is not (45 ms). A training step (jax.vjp) and a module with a dynamic
dim keep the decomposed form: the function's body there is not the forward's alone.
"""
from __future__ import annotations

import re
from typing import Literal

from bakeoff.workloads.decompose import sdpa_scale
from bakeoff.workloads.ir import Graph

AttentionOption = Literal["auto", "fused", "decomposed"]
DECOMPOSED = "decomposed (matmul, scale, mask, softmax, matmul)"
_ELEMENT = {"bfloat16": "bf16", "float16": "f16", "float32": "f32"}
_NEG_INF = {"bf16": "0xFF80", "f16": "0xFC00", "f32": "0xFF800000"}
# How JAX prints a top-level private function: its header on one line, its body up to a line "  }".
_FUNC = re.compile(r"^  func\.func private @(?P<name>bakeoff_sdpa(?:_\d+)?)\((?P<args>[^)]*)\) -> "
                   r"(?P<result>tensor<[^>]*>) \{\n(?P<body>.*?)^  \}$", re.MULTILINE | re.DOTALL)
_ARG = re.compile(r"%arg\d+: tensor<(?P<dims>(?:\d+x)+)(?P<element>bf16|f16|f32)>")


def wanted(option: str, dtype: str) -> tuple[bool, str]:
    """(whether to fuse, why) for attention option `option` on a graph of `dtype`."""
    if option == "decomposed":
        return False, "option attention=decomposed"
    if option == "fused":
        return True, "option attention=fused"
    if option != "auto":
        raise ValueError(f"iree attention must be one of auto, fused, decomposed; got {option!r}")
    return False, ("attention=auto keeps it decomposed: iree-compile 3.13's fused attention kernel measured slower "
                   "on the device in every dtype (bf16: the head dim in four tiles, no causal block skipped; fp32: no "
                   "tensor cores); attention=fused forces it")


def _shape(args_text: str) -> list[tuple[tuple[int, ...], str]] | None:
    args = [(tuple(int(d) for d in m["dims"].rstrip("x").split("x")), m["element"])
            for m in _ARG.finditer(args_text)]
    return args if len(args) == 3 and len(args) == args_text.count("%arg") else None


def _params(graph: Graph, q: tuple, k: tuple, v: tuple, element: str) -> tuple[float, bool] | None:
    """(scale, causal) of the graph's sdpa nodes with these q, k, v shapes, if they agree; None otherwise."""
    found = set()
    for n in graph.nodes:
        if n.op != "sdpa":
            continue
        nq, nk, nv = (graph.node(i) for i in n.inputs)
        shapes = tuple(tuple(int(d) for d in x.shape) for x in (nq, nk, nv))
        if shapes == (q, k, v) and _ELEMENT.get(n.dtype) == element:
            found.add((sdpa_scale(n, q[-1]), bool(n.attr("causal"))))
    return found.pop() if len(found) == 1 else None


def _tensor(dims: tuple[int, ...], element: str) -> str:
    return f"tensor<{'x'.join(str(d) for d in dims)}x{element}>"


def attention_function(name: str, q: tuple, k: tuple, v: tuple, element: str, scale: float, causal: bool) -> str:
    """The text of `func.func private @name(q, k, v)` computing softmax(q k^T * scale [causal]) v with
    `iree_linalg_ext.attention` (linalg, arith and tensor ops around it)."""
    batch = [f"b{i}" for i in range(len(q) - 2)]
    dims = ", ".join(batch + ["m", "n", "k1", "k2"])
    lead = "".join(f"{b}, " for b in batch)

    def amap(result: str) -> str:
        return f"affine_map<({dims}) -> ({result})>"

    tq, tk, tv = _tensor(q, element), _tensor(k, element), _tensor(v, element)
    out = _tensor(q[:-1] + (v[-1],), element)
    maps = [amap(f"{lead}m, k1"), amap(f"{lead}k2, k1"), amap(f"{lead}k2, n"), amap("")]
    operands, types, mask_ops = ["%q", "%k", "%v", "%scale"], [tq, tk, tv, element], []
    if causal:
        tm = _tensor((q[-2], k[-2]), element)
        maps.append(amap("m, k2"))
        operands.append("%mask")
        types.append(tm)
        mask_ops = [
            f"    %zero = arith.constant 0.0 : {element}",
            f"    %neg_inf = arith.constant {_NEG_INF[element]} : {element}",
            f"    %mask_init = tensor.empty() : {tm}",
            "    %mask = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>], "
            f"iterator_types = [\"parallel\", \"parallel\"]}} outs(%mask_init : {tm}) {{",
            f"    ^bb0(%unused: {element}):",
            "      %i = linalg.index 0 : index",
            "      %j = linalg.index 1 : index",
            "      %keep = arith.cmpi uge, %i, %j : index",
            f"      %value = arith.select %keep, %zero, %neg_inf : {element}",
            f"      linalg.yield %value : {element}",
            f"    }} -> {tm}",
        ]
    maps.append(amap(f"{lead}m, n"))
    return "\n".join([
        f"  func.func private @{name}(%q: {tq}, %k: {tk}, %v: {tv}) -> {out} {{",
        f"    %scale = arith.constant {scale:.17e} : {element}",
        *mask_ops,
        f"    %init = tensor.empty() : {out}",
        f"    %out = iree_linalg_ext.attention <indexing_maps = [{', '.join(maps)}]> "
        f"ins({', '.join(operands)} : {', '.join(types)}) outs(%init : {out}) {{",
        "    ^bb0(%score: f32):",
        "      iree_linalg_ext.yield %score : f32",
        f"    }} -> {out}",
        f"    return %out : {out}",
        "  }",
    ])


def fuse_attention(source: str, graph: Graph) -> tuple[str, int, list[str]]:
    """(`source` with each `bakeoff_sdpa` function rewritten to IREE's attention op, how many were, and the
    reasons for those left decomposed)."""
    fused, left = 0, []

    def rewrite(found: re.Match) -> str:
        nonlocal fused
        args = _shape(found["args"])
        if args is None or len({e for _, e in args}) != 1:
            left.append(f"@{found['name']}: its arguments are not q, k, v of one float dtype")
            return found.group(0)
        (q, element), (k, _), (v, _) = args
        ok = len(q) >= 2 and q[:-2] == k[:-2] == v[:-2] and q[-1] == k[-1] and k[-2] == v[-2]
        params = _params(graph, q, k, v, element) if ok else None
        if params is None:
            left.append(f"@{found['name']}: no single sdpa node of the graph with q {q}, k {k}, v {v}")
            return found.group(0)
        if found["result"] != _tensor(q[:-1] + (v[-1],), element):
            left.append(f"@{found['name']}: returns {found['result']}, not the attention's output alone")
            return found.group(0)
        fused += 1
        return attention_function(found["name"], q, k, v, element, *params)

    return _FUNC.sub(rewrite, source), fused, left


def route(source: str, graph: Graph, option: str, grad: bool, paths: dict[str, str]) -> tuple[str, dict[str, str]]:
    """(the StableHLO to compile, the lowering paths with the sdpa route in words) for attention `option`."""
    paths = dict(paths)
    if "sdpa" not in paths:
        return source, paths
    fuse, why = wanted(option, next(n.dtype for n in graph.nodes if n.op == "sdpa"))
    if fuse and grad:
        fuse, why = False, "a training step (jax.vjp) keeps IREE's attention decomposed"
    if not fuse:
        paths["sdpa"] = f"{DECOMPOSED}: {why}"
        return source, paths
    fused_source, count, left = fuse_attention(source, graph)
    if count == 0:
        paths["sdpa"] = f"{DECOMPOSED}: no attention function to fuse ({'; '.join(left) or 'none in the StableHLO'})"
        return source, paths
    paths["sdpa"] = ("fused: iree_linalg_ext.attention (IREE's attention op, as torch-mlir's SDPA reaches it; "
                     f"causal as an additive 0/-inf mask), {why}" + (f"; left decomposed: {'; '.join(left)}"
                                                                    if left else ""))
    return fused_source, paths
