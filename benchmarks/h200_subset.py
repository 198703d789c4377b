"""Write the subset of configs/h200.yaml that benchmarks/h200_speed.sh runs in one device call, and say which.

    python benchmarks/h200_subset.py configs/h200.yaml OUT.yaml

WORKLOADS, BACKENDS and DTYPES (space-separated, in the environment) override the subset; every name must be
one of the config's. Warm compile is turned on (the cold/warm cache check needs it); all else is the config's.
"""
from __future__ import annotations

import os
import sys

import yaml

WORKLOADS = "ew_sigmoid_relu layernorm_gelu softmax gemm_bias_gelu mlp_block"
BACKENDS = "eager inductor tritongen xla iree"


def main(src: str, dst: str) -> int:
    with open(src) as f:
        cfg = yaml.safe_load(f)
    workloads = (os.environ.get("WORKLOADS") or WORKLOADS).split()
    backends = (os.environ.get("BACKENDS") or BACKENDS).split()
    dtypes = (os.environ.get("DTYPES") or " ".join(cfg["dtypes"])).split()
    listed = cfg["backends"] if isinstance(cfg["backends"], dict) else {b: {} for b in cfg["backends"]}
    missing = [w for w in workloads if w not in cfg["workloads"]] + [b for b in backends if b not in listed]
    if missing:
        print(f"{src}: not in the config: {', '.join(missing)}", file=sys.stderr)
        return 2
    cfg.update(name=f"{cfg.get('name', 'h200')}_speed_subset", workloads=workloads,
               backends={b: listed[b] for b in backends}, dtypes=dtypes,
               compile={**(cfg.get("compile") or {}), "warm": True})
    with open(dst, "w") as f:
        yaml.safe_dump(cfg, f, sort_keys=False)
    left_out = sorted(set(cfg_workloads(src)) - set(workloads))
    print(f"SUBSET of {os.path.basename(src)} (the whole suite does not fit one call): workloads {workloads} "
          f"(left out: {left_out}), backends {backends}, dtypes {dtypes}, seeds {cfg.get('seeds')}, preset "
          f"{cfg.get('preset')}, warm compile on: {len(workloads) * len(backends) * len(dtypes)} cases", flush=True)
    return 0


def cfg_workloads(src: str) -> list[str]:
    with open(src) as f:
        return list(yaml.safe_load(f)["workloads"])


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
