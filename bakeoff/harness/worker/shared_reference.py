"""The float64 reference of one (graph, seed, device), computed once per run and read by every case that
needs it: the backends of one workload, shape and dtype all check against the same reference. Eager's
error against it (`numerics.error_stats`, the same for every backend of the group) is kept beside it and
read back only by a case whose own eager outputs have the same bytes (on the CPU, where they are hashed).

The first case of a group computes it (`checks.reference_outputs`, from its own inputs) while holding the
group's lock, and keeps it in the run's work folder when reading it back is cheaper than computing it
(`worth_keeping`: on a GPU, where the reference is computed on the device, a large output is recomputed
rather than stored). Later cases take the lock, check that their inputs are the ones the reference was
computed from (`inputs_digest`), and load it; with different inputs they compute their own. The reference
only ever comes from the inputs, never from any backend's output. Eager's outputs are not shared: each case
runs eager itself, which also warms the libraries (cuBLAS, OpenMP) before its compile is timed, as before.

BAKEOFF_REFERENCE_DIR names the folder (the local executor sets it; without it every case computes its own).
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Sequence

import torch

from bakeoff.harness.measure.checks import reference_outputs
from bakeoff.harness.measure.numerics import ErrorStats, error_stats
from bakeoff.harness.worker.phases import PhaseLog
from bakeoff.workloads.ir import Graph

ENV_REFERENCE_DIR = "BAKEOFF_REFERENCE_DIR"
KEEP_BYTES_PER_S = 1e9  # assumed speed of writing and reading a kept reference back, bytes per second
# The modules whose code decides a reference: a kept one is never read by a different version of them.
_CODE = ("workloads/ir.py", "workloads/decompose.py", "workloads/reference.py", "workloads/lower_torch.py",
         "workloads/vjp.py", "workloads/grad.py",
         "harness/measure/checks.py", "harness/measure/numerics.py", "harness/worker/input_tensors.py")
_PACKAGE = Path(__file__).resolve().parents[2]


@cache
def _code_digest() -> str:
    h = hashlib.sha256()
    for rel in _CODE:
        h.update((_PACKAGE / rel).read_bytes())
    return h.hexdigest()


def reference_key(graph: Graph, seed: int, device: str, grad: bool = False) -> str:
    """A name for the reference of `graph` (bound: shapes and dtypes) on `seed`'s inputs on `device`; of its
    training step (outputs and gradients) with `grad`."""
    text = json.dumps({"graph": graph.to_json(), "seed": seed, "device": device, "torch": torch.__version__,
                       "code": _code_digest(), **({"grad": True} if grad else {})}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def inputs_digest(inputs: Sequence[torch.Tensor]) -> list[str]:
    """A fingerprint of each input: its bytes' hash on the CPU; on a GPU (where hashing means a copy to the
    host) its shape, dtype, float64 sum and norm and its first and last elements."""
    out = []
    for x in inputs:
        if x.device.type == "cpu":
            data = x.contiguous().view(torch.uint8).numpy().tobytes()
            out.append(f"{tuple(x.shape)}:{x.dtype}:{hashlib.blake2b(data, digest_size=16).hexdigest()}")
        else:
            flat = x.reshape(-1)
            edges = torch.cat([flat[:16], flat[-16:]]).double().cpu().tolist()
            out.append(f"{tuple(x.shape)}:{x.dtype}:{float(flat.sum(dtype=torch.float64))!r}:"
                       f"{float(torch.linalg.vector_norm(flat, dtype=torch.float64))!r}:{edges!r}")
    return out


def worth_keeping(compute_s: float, nbytes: int) -> bool:
    """Whether writing a reference of `nbytes` and reading it back beats computing it (`compute_s` seconds)."""
    return compute_s > 2 * nbytes / KEEP_BYTES_PER_S


@dataclass
class GroupReference:
    """A seed's float64 reference outputs, eager's error against each (None: not known, compute it), and
    where the reference came from: "computed" here or "shared" (read back)."""

    refs: list[torch.Tensor]
    eager_vs_refs: list[ErrorStats] | None
    source: str


def shared_reference(graph: Graph, seed: int, inputs: Sequence[torch.Tensor], eager_outputs: Sequence[torch.Tensor],
                     device: str, phases: PhaseLog, grad: bool = False) -> GroupReference:
    """The float64 reference outputs for `inputs` (drawn with `seed`), computed here or read back (computed
    by an earlier case of this run from the same inputs), and eager's error against them. With `grad`, of the
    training step: `inputs` end with the cotangents, and the references are the outputs then the gradients."""
    folder = os.environ.get(ENV_REFERENCE_DIR)
    if not folder:
        with phases.phase("reference"):
            refs = reference_outputs(graph, inputs, device, grad)
        return GroupReference(refs, None, "computed")
    entry = Path(folder) / reference_key(graph, seed, device, grad)
    entry.parent.mkdir(parents=True, exist_ok=True)
    with phases.phase("reference_wait"):
        fd = os.open(str(entry) + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)  # another case computing the same reference: wait for it
    try:
        with phases.phase("reference"):
            digest = inputs_digest(inputs)
            refs, source = _load(entry, digest, device), "shared"
            if refs is None:
                t0 = time.perf_counter()
                refs, source = reference_outputs(graph, inputs, device, grad), "computed"
                if worth_keeping(time.perf_counter() - t0, sum(r.numel() * r.element_size() for r in refs)):
                    _keep(entry, refs, digest)
        with phases.phase("checks"):
            return GroupReference(refs, _eager_stats(entry, eager_outputs, refs, keep=entry.exists()), source)
    finally:
        os.close(fd)  # releases the lock


def _eager_stats(entry: Path, eager_outputs: Sequence[torch.Tensor], refs: list[torch.Tensor],
                 keep: bool) -> list[ErrorStats] | None:
    """Eager's error against each reference: read back when kept for eager outputs of the same bytes, else
    computed (and kept when the reference is). None when eager's outputs do not fit the references (the
    check reports that)."""
    if len(eager_outputs) != len(refs) or any(tuple(e.shape) != tuple(r.shape) for e, r in zip(eager_outputs, refs)):
        return None
    key = _exact_digest(eager_outputs)
    path = entry / "eager_stats.json"
    if key is not None and keep:
        try:
            kept = json.loads(path.read_text()).get(key)
        except (OSError, ValueError):
            kept = None
        if kept is not None:
            return [ErrorStats(**d) for d in kept]
    stats = [error_stats(e, r) for e, r in zip(eager_outputs, refs)]
    if key is not None and keep:
        tmp = path.with_suffix(".part")
        tmp.write_text(json.dumps({key: [dict(s.__dict__) for s in stats]}))
        os.replace(tmp, path)
    return stats


def _exact_digest(tensors: Sequence[torch.Tensor]) -> str | None:
    """A hash of the tensors' bytes, or None where that would mean copying them off a GPU."""
    if any(t.device.type != "cpu" for t in tensors):
        return None
    h = hashlib.blake2b(digest_size=16)
    for t in tensors:
        h.update(f"{tuple(t.shape)}:{t.dtype}".encode())
        h.update(t.contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _load(entry: Path, digest: list[str], device: str) -> list[torch.Tensor] | None:
    try:
        meta = json.loads((entry / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    if meta.get("inputs") != digest:
        return None  # not this case's inputs: never judge a case against another's reference
    return [t.to(device) for t in torch.load(entry / "refs.pt", map_location="cpu", weights_only=True)]


def _keep(entry: Path, refs: list[torch.Tensor], digest: list[str]) -> None:
    """Write the reference under `entry` atomically (a folder renamed into place once complete)."""
    part = entry.with_name(entry.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    part.mkdir(parents=True)
    torch.save([r.detach().cpu().contiguous() for r in refs], part / "refs.pt")
    (part / "meta.json").write_text(json.dumps({"inputs": digest}))
    shutil.rmtree(entry, ignore_errors=True)
    os.replace(part, entry)
