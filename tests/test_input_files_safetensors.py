""".safetensors input files: written with the reference implementation (the `safetensors` package, in the
test extra), read by bakeoff's own reader of the format (workloads/tensor_files.py), checked at config load."""
from __future__ import annotations

import pytest
import torch

from ci_required import importorskip
from input_configs import config_error, inputs_of, write_config
from bakeoff.workloads.tensor_files import load_tensor

safetensors_torch = importorskip("safetensors.torch", "pip install safetensors (the test extra)")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_safetensors_dtypes_read_bit_for_bit(tmp_path, dtype):
    t = (torch.randn(5, 7, dtype=torch.float64) * 100).to(dtype)
    safetensors_torch.save_file({"a": t, "b": torch.zeros(3)}, str(tmp_path / "t.safetensors"))
    got = load_tensor(tmp_path / "t.safetensors", "a")
    assert got.dtype == dtype and torch.equal(got, t)


def test_safetensors_key_defaults_to_the_input_name(tmp_path):
    x, y = torch.randn(64, 512), torch.randn(64, 512)
    safetensors_torch.save_file({"y": y, "x": x}, str(tmp_path / "t.safetensors"), metadata={"made_by": "a test"})
    a, b = inputs_of(write_config(tmp_path, "x: {file: t.safetensors}\ny: {file: t.safetensors}\n"))
    assert torch.equal(a, x) and torch.equal(b, y)


def test_safetensors_bfloat16_input(tmp_path):
    x = torch.randn(64, 512).bfloat16()
    safetensors_torch.save_file({"weights": x}, str(tmp_path / "t.safetensors"))
    got = inputs_of(write_config(tmp_path, "x: {file: t.safetensors, key: weights}\n", dtypes="[bfloat16]"))[0]
    assert got.dtype == torch.bfloat16 and torch.equal(got, x)


def test_safetensors_errors(tmp_path):
    safetensors_torch.save_file({"a": torch.zeros(64, 512), "b": torch.zeros(64, 512)}, str(tmp_path / "t.safetensors"))
    err = config_error(write_config(tmp_path, "x: {file: t.safetensors, key: c}\n"))
    assert err.field == "workloads.0.init.x.key" and "has no tensor 'c'; it has a, b" in err.message
    err = config_error(write_config(tmp_path, "x: {file: t.safetensors}\n"))  # no key, no tensor named x
    assert err.field == "workloads.0.init.x.file" and "no tensor 'x'" in err.message
    safetensors_torch.save_file({"x": torch.zeros(64, 512, dtype=torch.float16)}, str(tmp_path / "h.safetensors"))
    err = config_error(write_config(tmp_path, "x: {file: h.safetensors}\n"))
    assert "holds float16; this workload runs in float32" in err.message
    safetensors_torch.save_file({"x": torch.zeros(64, 512, dtype=torch.int64)}, str(tmp_path / "i.safetensors"))
    err = config_error(write_config(tmp_path, "x: {file: i.safetensors}\n"))
    assert "holds int64" in err.message
    (tmp_path / "bad.safetensors").write_bytes((10).to_bytes(8, "little") + b"not json!!")
    err = config_error(write_config(tmp_path, "x: {file: bad.safetensors}\n"))
    assert "unreadable .safetensors header" in err.message


def test_safetensors_truncated_file(tmp_path):
    safetensors_torch.save_file({"x": torch.zeros(64, 512)}, str(tmp_path / "t.safetensors"))
    data = (tmp_path / "t.safetensors").read_bytes()
    (tmp_path / "t.safetensors").write_bytes(data[:-4])
    err = config_error(write_config(tmp_path, "x: {file: t.safetensors}\n"))
    assert "truncated" in err.message
