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
    listed = {"workload": workloads, "shape": [], "dtype": dtypes, "backend": backends}
    first: dict[str, dict[str, int]] = {key: {} for key in listed}  # each value's first-seen position
    for r in records:
        for key, seen in first.items():
            seen.setdefault(str(r.get(key) or ""), len(seen))

    def rank(r: dict[str, Any], key: str) -> tuple[int, int]:
        value = str(r.get(key) or "")
        return (0, listed[key].index(value)) if value in listed[key] else (1, first[key][value])

    return sorted(records, key=lambda r: tuple(rank(r, key) for key in listed))
