"""The float64 reference of one (graph, seed, device), computed once per run and read by every case that
needs it: the backends of one workload, shape and dtype all check against the same reference.

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
from functools import cache
from pathlib import Path
from typing import Sequence

import torch

from bakeoff.harness.measure.checks import reference_outputs
from bakeoff.harness.run.worker.phases import PhaseLog
from bakeoff.workloads.ir import Graph

ENV_REFERENCE_DIR = "BAKEOFF_REFERENCE_DIR"
KEEP_BYTES_PER_S = 1e9  # assumed speed of writing and reading a kept reference back, bytes per second
# The modules whose code decides a reference: a kept one is never read by a different version of them.
_CODE = ("workloads/ir.py", "workloads/decompose.py", "workloads/reference.py", "workloads/lower_torch.py",
         "harness/measure/checks.py", "harness/run/worker/inputs.py")
_PACKAGE = Path(__file__).resolve().parents[3]


@cache
def _code_digest() -> str:
    h = hashlib.sha256()
    for rel in _CODE:
        h.update((_PACKAGE / rel).read_bytes())
    return h.hexdigest()


def reference_key(graph: Graph, seed: int, device: str) -> str:
    """A name for the reference of `graph` (bound: shapes and dtypes) on `seed`'s inputs on `device`."""
    text = json.dumps({"graph": graph.to_json(), "seed": seed, "device": device, "torch": torch.__version__,
                       "code": _code_digest()}, sort_keys=True)
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


def shared_reference(graph: Graph, seed: int, inputs: Sequence[torch.Tensor], device: str,
                     phases: PhaseLog) -> tuple[list[torch.Tensor], str]:
    """The float64 reference outputs for `inputs` (drawn with `seed`) and where they came from: "computed"
    here or "shared" (read, computed by an earlier case of this run from the same inputs)."""
    folder = os.environ.get(ENV_REFERENCE_DIR)
    if not folder:
        with phases.phase("reference"):
            return reference_outputs(graph, inputs, device), "computed"
    entry = Path(folder) / reference_key(graph, seed, device)
    entry.parent.mkdir(parents=True, exist_ok=True)
    with phases.phase("reference_wait"):
        fd = os.open(str(entry) + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)  # another case computing the same reference: wait for it
    try:
        with phases.phase("reference"):
            digest = inputs_digest(inputs)
            kept = _load(entry, digest, device)
            if kept is not None:
                return kept, "shared"
            t0 = time.perf_counter()
            refs = reference_outputs(graph, inputs, device)
            compute_s = time.perf_counter() - t0
            if worth_keeping(compute_s, sum(r.numel() * r.element_size() for r in refs)):
                _keep(entry, refs, digest)
            return refs, "computed"
    finally:
        os.close(fd)  # releases the lock


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
