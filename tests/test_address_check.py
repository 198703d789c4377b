"""benchmarks/address_check.py: the address and repeat spreads on made-up medians, and where an input view lies
(the GPU run is the benchmark itself)."""
from __future__ import annotations

import pytest
import torch

from benchmarks import address_check as ac


def test_address_spread_is_across_offsets_and_repeat_spread_within_one():
    # what the H100 showed for eager's RMSNorm: 0.109 at one offset, 0.124 at another, each offset steady
    ms = {0: [0.124, 0.1245, 0.1242], 4: [0.1088, 0.109, 0.1086], 64: [0.120, 0.1205, 0.1201]}
    got = ac.summarise(ms)
    assert got["ms_by_offset_kib"] == {0: 0.1242, 4: 0.1088, 64: 0.1201}
    assert got["address_spread"] == pytest.approx(0.1242 / 0.1088 - 1)
    assert got["repeat_spread"] == pytest.approx(0.1205 / 0.120 - 1)  # the widest of the three offsets
    assert (got["slowest_kib"], got["fastest_kib"]) == (0, 4)


def test_one_round_has_no_repeat_spread():
    got = ac.summarise({0: [0.1], 4: [0.2]})
    assert got["repeat_spread"] is None
    assert got["address_spread"] == pytest.approx(1.0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_placed_views_start_that_many_kib_into_the_pool(dtype):
    like = torch.zeros(3, 5, dtype=dtype)
    pool = torch.zeros(like.numel() + 4 * 1024 // like.element_size(), dtype=dtype)
    for off in (0, 4):
        v = ac.placed(pool, off, like)
        assert v.shape == like.shape and v.dtype == dtype
        assert v.data_ptr() - pool.data_ptr() == off * 1024
        v.fill_(1)
    assert pool.sum().item() == 2 * like.numel()  # two views apart, each written once


def test_the_table_prints_each_offset_and_both_spreads(capsys):
    ms = {0: [0.124, 0.124], 4: [0.109, 0.110]}
    ac.print_table([{"workload": "rmsnorm", "dtype": "bfloat16", **ac.summarise(ms)}])
    out = capsys.readouterr().out.splitlines()
    assert out[1].split()[:4] == ["rmsnorm", "bfloat16", f"{0.124 / 0.1095 - 1:.1%}", f"{0.110 / 0.109 - 1:.1%}"]
    assert "0:0.1240" in out[1] and "4:0.1095" in out[1]
