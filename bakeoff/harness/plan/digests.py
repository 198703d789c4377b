"""Digests that say whether two records measured the same thing: the bound graph, the backend options and the
timing settings (asv refuses to compare a benchmark across a change of its code; so does `bakeoff compare`).

Each is the first 16 hex digits of a SHA-256 over canonical JSON (sorted keys), so equal inputs give equal
digests on every machine and Python version.
- graph_digest: the bound graph's nodes and outputs (ops, attributes, input distributions, shapes, dtypes);
  not its name, which the case key already holds; for a training step (`grad: true`), that it is one: a
  forward case and a training step of the same graph never compare (a forward's digest is unchanged); and a
  shape sweep's (its first value's graph) adds the swept dim and its values.
- options_digest: the backend options the case ran with, every default filled in (`{}` and `{mode: default}`
  digest alike).
- timing_digest: every timing setting except those that only say when to stop sampling (STOPPING_RULE):
  flush_l2, cuda_graph, profile and any setting added later change what a sample is and so enter the digest;
  warmup_s, budget_s, min_reps, max_reps and target_iqr change how many samples there are, not what each one
  measures. The settings digested are kept in the record as `timing_settings`, so a difference can be named.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping, Sequence

STOPPING_RULE = frozenset({"warmup_s", "budget_s", "min_reps", "max_reps", "target_iqr"})


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def graph_digest(graph_json: Mapping[str, Any], grad: bool = False,
                 sweep: tuple[str, Sequence[int]] | None = None) -> str:
    """Of a bound graph's JSON (Graph.to_json()): its nodes and outputs; `grad` (the training step) when set;
    for a shape sweep, the swept dim and its values in serving order, so a sweep is compared only with the
    same sweep (the digest of a forward case without a sweep is unchanged)."""
    value: dict[str, Any] = {"nodes": graph_json.get("nodes"), "outputs": graph_json.get("outputs")}
    if grad:
        value["step"] = "forward+backward"
    if sweep:  # (dim, values)
        value["sweep"] = {"dim": sweep[0], "values": list(sweep[1])}
    return _digest(value)


def options_digest(options: Mapping[str, Any]) -> str:
    return _digest(dict(options))


def timing_settings(timing: Mapping[str, Any]) -> dict[str, Any]:
    """The timing settings that change what a sample measures (all but STOPPING_RULE)."""
    return {k: v for k, v in sorted(timing.items()) if k not in STOPPING_RULE}


def timing_digest(timing: Mapping[str, Any]) -> str:
    return _digest(timing_settings(timing))


def case_digests(graph_json: Mapping[str, Any], options: Mapping[str, Any], timing: Mapping[str, Any],
                 grad: bool = False, sweep: tuple[str, Sequence[int]] | None = None) -> dict[str, Any]:
    """The record fields graph_digest, options_digest, timing_digest and timing_settings."""
    return {"graph_digest": graph_digest(graph_json, grad, sweep), "options_digest": options_digest(options),
            "timing_digest": timing_digest(timing), "timing_settings": timing_settings(timing)}
