"""benchmarks/flush_process_check.py: the spread across processes and the per-mode summary, on made-up medians
(the GPU run is the benchmark itself)."""
from __future__ import annotations

import pytest

from benchmarks import flush_process_check as fc


def test_spread_is_max_over_min_and_needs_two_processes():
    assert fc.spread([0.107, 0.126, 0.110]) == pytest.approx(0.126 / 0.107 - 1)
    assert fc.spread([0.1]) is None
    assert fc.spread([]) is None


def test_summary_keeps_each_process_median_per_probe_and_mode():
    # the write flush's process spread (18%) gone after a read flush: what the check would show if the
    # flush's write-backs made each process's time
    procs = [{"medians_ms": {"rms_norm bf16": {"write": w, "read": 0.100, "none": 0.099}}} for w in (0.107, 0.126)]
    got = fc.summarise(procs)["rms_norm bf16"]
    assert got["write"]["medians_ms"] == [0.107, 0.126]
    assert got["write"]["spread"] == pytest.approx(0.126 / 0.107 - 1)
    assert got["read"]["spread"] == pytest.approx(0.0)
    assert set(got) == set(fc.MODES)


def test_processes_hold_the_given_memory_in_turn():
    assert [fc.hold_of(i, [0, 8, 24]) for i in range(5)] == [0.0, 8.0, 24.0, 0.0, 8.0]
    assert fc.hold_of(3, []) == 0.0


def test_the_table_names_what_each_process_held(capsys):
    procs = [{"medians_ms": {"rms_norm bf16": {m: 0.1 for m in fc.MODES}}} for _ in range(2)]
    fc.print_table(fc.summarise(procs), [0.0, 8.0])
    assert capsys.readouterr().out.splitlines()[0] == "GiB held before the buffers, per process: 0 8"
    fc.print_table(fc.summarise(procs), [0.0, 0.0])
    assert "held" not in capsys.readouterr().out
