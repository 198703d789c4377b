"""Parallel slots take a run's cases longest first (plan/order.py), through the local executor itself."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from bakeoff.harness.config.schema import parse_config
from bakeoff.harness.plan.workloads import resolve_workloads
from bakeoff.harness.plan.cases import plan_cases
from bakeoff.harness.plan.order import estimated_work, longest_first
from bakeoff.harness.run.executors import local

CONFIG = """
name: order
device: cpu
preset: gpu
dtypes: [float32, bfloat16]
workloads: [ew_sigmoid_relu, gemm_bias_gelu, softmax, mlp_block]
backends: [eager]
"""


def _cases():
    cfg, where = parse_config(CONFIG, "<order>")
    return plan_cases(cfg, resolve_workloads(cfg, where, "gpu", "cpu"), "cpu")


def test_the_largest_work_goes_first_and_ties_keep_the_config_order():
    cases = _cases()
    ordered = longest_first(cases)
    work = [estimated_work(c) for c in ordered]
    assert work == sorted(work, reverse=True) and sorted(map(id, ordered)) == sorted(map(id, cases))
    assert [c.workload for c in ordered[:2]] == ["mlp_block"] * 2  # the gpu preset's sizes, planned here
    # Equal estimates keep the config's order.
    same = [dataclasses.replace(c, flops=1, bytes_moved=1) for c in cases]
    assert longest_first(same) == same
    # On a GPU, float32 flops count FP32_ON_GPU times (no 16-bit tensor cores); a skipped case costs nothing.
    gemm = [c for c in cases if c.workload == "gemm_bias_gelu"]
    on_gpu = [dataclasses.replace(c, device="cuda:0") for c in gemm]
    assert estimated_work(on_gpu[0]) > estimated_work(gemm[0])
    assert estimated_work(on_gpu[1]) == estimated_work(gemm[1])  # bfloat16: the same on either device
    assert estimated_work(dataclasses.replace(cases[0], skip_reason="not here")) == 0.0


def test_two_slots_take_cases_longest_first_one_slot_in_config_order(monkeypatch, tmp_path):
    taken: list[str] = []

    def fake_execute(case, work_dir, **_):
        taken.append(case.case_id)
        return {"status": "ok", "worker": None}

    monkeypatch.setattr(local, "execute_case", fake_execute)
    cases = _cases()
    for slots, expected in ((1, cases), (2, longest_first(cases))):
        taken.clear()
        executor = local.LocalExecutor([local.Slot(f"cpu#{i}", "cpu") for i in range(slots)], prestart=False)
        list(executor.run(cases, Path(tmp_path)))
        assert sorted(taken) == sorted(c.case_id for c in cases)
        if slots == 1:
            assert taken == [c.case_id for c in expected]
        else:  # two threads take from one queue: the first two taken are the two largest
            assert set(taken[:2]) == {c.case_id for c in expected[:2]}
