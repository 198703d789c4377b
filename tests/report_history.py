"""Synthetic histories for the report/compare/dashboard tests, written through Store.create_run/add_record.

These numbers are made up on purpose (tests only): a series that steps up 30% in latency for the last two
runs, a series with ±8% noise and no shift, a case that goes from ok to mismatch in the last run, and an
environment change (driver and torch version) where the step begins.
"""
from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass

from sqlalchemy import update

from bakeoff.results.schema import runs as runs_table
from bakeoff.results.store import Store

N_RUNS = 20
STEP_AT = N_RUNS - 2  # the last two runs carry the regression and the new environment
REGRESS = ("gemm_synth", "M=64,N=64,K=64", "bfloat16", "inductor")
NOISY = ("softmax_synth", "M=64,N=512", "bfloat16", "xla")
FLIP = ("layernorm_synth", "M=64,N=256", "bfloat16", "tritongen")


@dataclass(frozen=True)
class SyntheticHistory:
    url: str
    run_ids: list[str]  # oldest first


def environment(night: int) -> dict:
    """A GPU machine's environment; the driver and torch change at STEP_AT."""
    new = night >= STEP_AT
    return {"device": "cuda:0", "gpu_name": "NVIDIA H200", "gpu_memory_mb": 143771, "sm_count": 132,
            "compute_capability": "9.0", "driver": "575.51" if new else "570.86", "cuda_runtime": "12.8",
            "cpu_model": "Intel Xeon", "python": "3.11.7", "harness_rev": f"rev{night:03d}",
            "versions": {"torch": "2.13.0" if new else "2.12.1", "jax": "0.10.2"},
            "fingerprint": f"fp-{'new' if new else 'old'}-{night:03d}", "load_avg": [0.1, 0.1, 0.1]}


def record(key: tuple[str, str, str, str], median_ms: float, rng: random.Random, status: str = "ok",
           compile_s: float = 10.0, err: float = 2e-3) -> dict:
    """A record with 30 latency samples within ±2% of `median_ms`."""
    wl, shape, dtype, backend = key
    samples = [median_ms * (1 + rng.uniform(-0.02, 0.02)) for _ in range(30)]
    samples.sort()
    eager_ms = 2.0
    return {"case_id": "/".join(key), "workload": wl, "preset": "gpu", "shape": shape, "dtype": dtype,
            "backend": backend, "device": "cuda:0", "status": status,
            "reason": "error vs fp64 beyond tolerance: RMSE 0.4 is 40x eager's (limit 3x)"
            if status == "mismatch" else None,
            "compile_s": compile_s, "compile_warm_s": compile_s / 4, "cache_hit_warm": True,
            "latency_ms_median": samples[15], "latency_ms_p20": samples[6], "latency_ms_p80": samples[24],
            "n_samples": 30, "samples_ms": samples, "eager_latency_ms_median": eager_ms,
            "speedup_vs_eager": eager_ms / samples[15], "err_rel_l2_vs_fp64": err * (20 if status == "mismatch" else 1),
            "eager_err_rel_l2_vs_fp64": 2e-3, "err_ratio_vs_eager": err / 2e-3, "flops": 5e8, "bytes_moved": 2.4e7,
            "achieved_tflops": 5e8 / (samples[15] * 1e-3) / 1e12, "achieved_gbps": 2.4e7 / (samples[15] * 1e-3) / 1e9,
            "kernel_count": 2}


def write_history(url: str, seed: int = 0) -> SyntheticHistory:
    """N_RUNS nightly runs, one day apart, into the store at `url`."""
    store = Store(url)
    rng = random.Random(seed)
    start = dt.datetime(2026, 10, 1, 2, 17, tzinfo=dt.timezone.utc)
    ids = []
    for night in range(N_RUNS):
        run_id = store.create_run(config_name="nightly-synthetic", config_path=None, config_text="", device="cuda:0",
                                  environment=environment(night), n_cases=3)
        stepped = night >= STEP_AT
        store.add_record(run_id, record(REGRESS, 1.0 * (1.3 if stepped else 1.0) * (1 + rng.uniform(-0.01, 0.01)), rng))
        store.add_record(run_id, record(NOISY, 1.5 * (1 + rng.uniform(-0.08, 0.08)), rng, compile_s=30.0))
        store.add_record(run_id, record(FLIP, 0.8, rng, status="mismatch" if night == N_RUNS - 1 else "ok",
                                        compile_s=5.0))
        store.finish_run(run_id, "complete")
        with store.engine.begin() as conn:  # space the runs one night apart, as a nightly job would
            conn.execute(update(runs_table).where(runs_table.c.run_id == run_id)
                         .values(started_at=start + dt.timedelta(days=night)))
        ids.append(run_id)
    return SyntheticHistory(url, ids)
