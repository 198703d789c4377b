"""The order a run's cases are shown in: the config's own (its workloads, then dtypes, then backends, as the
config lists them), not the order the workers finished them in, which with `--jobs N` changes from run to run.

The store keeps records in insertion order (results/store.py); `show`, the end of `run` and the report read
them through `in_config_order`, with the run's stored `config_text`. Names the config does not list (a shape
of a sweep, a config that cannot be read) keep their first-seen order, after those it lists.
"""
from __future__ import annotations

from typing import Any, Sequence

import yaml


def config_lists(config_text: str | None) -> tuple[list[str], list[str], list[str]]:
    """(workload names, dtypes, backend labels) in the order the config lists them; empty lists where the text
    is missing, not YAML or without that key."""
    try:
        cfg = yaml.safe_load(config_text or "") or {}
    except yaml.YAMLError:
        return [], [], []
    if not isinstance(cfg, dict):
        return [], [], []
    workloads = [w.get("name") if isinstance(w, dict) else w for w in cfg.get("workloads") or []]
    backends = cfg.get("backends") or []
    return ([str(w) for w in workloads if w is not None], [str(d) for d in cfg.get("dtypes") or []],
            [str(b) for b in backends])


def in_config_order(records: Sequence[dict[str, Any]], config_text: str | None) -> list[dict[str, Any]]:
    """`records` sorted by the config's workload, shape (first seen), dtype and backend order."""
    workloads, dtypes, backends = config_lists(config_text)
    seen: dict[tuple[str, str], dict[str, int]] = {}

    def rank(kind: str, listed: list[str], value: Any) -> tuple[int, int]:
        value = str(value or "")
        if value in listed:
            return 0, listed.index(value)
        first = seen.setdefault((kind, ""), {})
        return 1, first.setdefault(value, len(first))

    for r in records:  # first-seen positions, fixed before sorting
        for kind, key in (("workload", "workload"), ("shape", "shape"), ("dtype", "dtype"), ("backend", "backend")):
            rank(kind, [], r.get(key))
    return sorted(records, key=lambda r: (rank("workload", workloads, r.get("workload")),
                                          rank("shape", [], r.get("shape")),
                                          rank("dtype", dtypes, r.get("dtype")),
                                          rank("backend", backends, r.get("backend"))))
