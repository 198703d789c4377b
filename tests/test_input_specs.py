"""Inputs a config controls (`init:` per workload input): each distribution's statistics, explicit values,
.npy and .safetensors files, and the exit-2 errors for what does not fit."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from input_configs import config_error, inputs_of, resolve, write_config
from bakeoff.harness.plan.cases import Case, plan_cases
from bakeoff.harness.worker.input_tensors import make_inputs
from bakeoff.workloads.inits import describe_inputs, parse_init
from bakeoff.workloads.tensor_files import TensorFileError


def test_normal_mean_and_std(tmp_path):
    x, y = inputs_of(write_config(tmp_path, "x: {dist: normal, mean: 1.0e4, std: 2}\n"))
    assert abs(float(x.double().mean()) - 1e4) < 0.05  # 32768 draws: the mean's std is 2/181
    assert abs(float(x.double().std()) - 2.0) < 0.05
    assert abs(float(y.double().mean())) < 0.05 and abs(float(y.double().std()) - 1.0) < 0.05  # untouched: N(0, 1)


def test_yaml_1e4_without_a_dot_is_a_number(tmp_path):
    x, _ = inputs_of(write_config(tmp_path, "x: {dist: normal, mean: 1e4, std: 1}\n"))
    assert abs(float(x.double().mean()) - 1e4) < 0.1


def test_uniform_range(tmp_path):
    x, _ = inputs_of(write_config(tmp_path, "x: {dist: uniform, low: -3, high: 5}\n"))
    assert float(x.min()) >= -3 and float(x.max()) < 5
    assert float(x.min()) < -2.9 and float(x.max()) > 4.9
    assert abs(float(x.double().mean()) - 1.0) < 0.05  # uniform's mean (low + high) / 2; std 2.31/181


def test_mix_outlier_columns(tmp_path):
    x, _ = inputs_of(write_config(tmp_path, "x: {dist: mix, std: 1, outlier_share: 0.01, outlier_std: 100, "
                                     "outliers: columns}\n"))
    col_std = x.double().std(dim=0)
    outliers = (col_std > 20).nonzero().flatten()
    assert len(outliers) == math.ceil(0.01 * 512)  # whole columns, ceil(share x N) of them
    assert (col_std[col_std <= 20] < 1.6).all() and (col_std[outliers] > 60).all()


def test_mix_outlier_elements_share(tmp_path):
    x, _ = inputs_of(write_config(tmp_path, "x: {dist: mix, outlier_share: 0.05, outlier_std: 1000}\n"))
    big = int((x.abs() > 10).sum())  # inliers N(0, 1) never reach 10; outliers N(0, 1000) below 10 once in 125
    expected = math.ceil(0.05 * x.numel())
    assert expected * 0.97 < big <= expected


def test_lognormal_magnitudes_and_signs(tmp_path):
    x, y = inputs_of(write_config(tmp_path, "x: {dist: lognormal, log10_mean: -3, log10_std: 0.5}\n"
                                     "y: {dist: lognormal, log10_mean: 2, log10_std: 1, sign: negative}\n"))
    decades = x.double().abs().log10()
    assert abs(float(decades.mean()) + 3) < 0.02 and abs(float(decades.std()) - 0.5) < 0.02
    assert 0.45 < float((x > 0).double().mean()) < 0.55  # random signs
    assert (y < 0).all() and abs(float(y.double().abs().log10().mean()) - 2) < 0.03


def test_lognormal_below_float16_range_rounds_like_a_cast(tmp_path):
    path = write_config(tmp_path, "x: {dist: lognormal, log10_mean: -9, log10_std: 0.1, sign: positive}\n",
                   dtypes="[float16]")
    x, _ = inputs_of(path)
    assert x.dtype == torch.float16 and (x == 0).all()  # 1e-9 is below float16's smallest subnormal (6e-8)


def test_random_kinds_vary_with_the_seed_and_fixed_kinds_do_not(tmp_path):
    path = write_config(tmp_path, "x: {values: [1.0, 2.0, 3.0]}\n")
    a, b = inputs_of(path, seed=0), inputs_of(path, seed=1)
    assert torch.equal(a[0], b[0])  # explicit values: the same for every seed
    assert not torch.equal(a[1], b[1])  # y is random
    again = inputs_of(path, seed=1)
    assert torch.equal(again[1], b[1])  # and reproducible


def test_values_one_row_repeated(tmp_path):
    x, _ = inputs_of(write_config(tmp_path, "x: {values: [1.0, 2.0, 3.0]}\n", dims="{M: 2, N: 7}"))
    assert x.tolist() == [[1, 2, 3, 1, 2, 3, 1]] * 2


def test_values_one_row_padded(tmp_path):
    x, _ = inputs_of(write_config(tmp_path, "x: {values: [1.0], pad: 1.0e-8}\n", dims="{M: 3, N: 8}"))
    assert x.shape == (3, 8) and (x[:, 0] == 1.0).all() and (x[:, 1:] == torch.tensor(1e-8)).all()
    # the float64 sum of the float32 inputs, as the reference sees them
    assert float(x.double().sum(-1)[0]) == pytest.approx(1.00000007, rel=1e-15, abs=1e-15)


def test_values_whole_tensor_and_non_finite(tmp_path):
    x, _ = inputs_of(write_config(tmp_path, "x: {values: [1, 2, 3, 4, .inf, -.inf, .nan, 0]}\n", dims="{M: 2, N: 4}"))
    assert x[0].tolist() == [1, 2, 3, 4] and x[1, 0] == math.inf and x[1, 1] == -math.inf and x[1, 2].isnan()


def test_values_that_fit_neither_a_row_nor_the_tensor(tmp_path):
    err = config_error(write_config(tmp_path, "x: {values: [1, 2, 3, 4, 5]}\n", dims="{M: 2, N: 4}"))
    assert err.field == "workloads.0.init.x.values" and err.line == 10
    assert "5 values" in err.message and "[2, 4]" in err.message


@pytest.mark.parametrize("init, field, words", [
    ("q: {dist: normal}\n", "workloads.0.init.q", "no input 'q'; its inputs: x, y"),
    ("x: {dist: gauss}\n", "workloads.0.init.x.dist", "unknown distribution 'gauss'"),
    ("x: {std: 1}\n", "workloads.0.init.x", "needs `dist`"),
    ("x: {dist: normal, std: -1}\n", "workloads.0.init.x.std", "greater than 0"),
    ("x: {dist: normal, sd: 1}\n", "workloads.0.init.x.sd", "unknown key 'sd'"),
    ("x: {dist: normal, mean: .inf}\n", "workloads.0.init.x.mean", "finite"),
    ("x: {dist: uniform, low: 2, high: 1}\n", "workloads.0.init.x", "low (2) must be below high (1)"),
    ("x: {dist: mix, outlier_share: 1.5}\n", "workloads.0.init.x.outlier_share", "less than or equal to 1"),
    ("x: {dist: mix, outliers: diagonal}\n", "workloads.0.init.x.outliers", "'elements', 'columns' or 'rows'"),
    ("x: {dist: normal, mean: true}\n", "workloads.0.init.x.mean", "boolean"),
    ("x: {values: []}\n", "workloads.0.init.x.values", "at least 1"),
])
def test_bad_specs_name_the_field(tmp_path, init, field, words):
    err = config_error(write_config(tmp_path, init))
    assert err.field == field, str(err)
    assert words in err.message, str(err)
    assert err.line == 10 and err.file.endswith("c.yaml")


def test_builtin_workload_inputs_and_its_digest(tmp_path):
    default = tmp_path / "a.yaml"
    default.write_text("device: cpu\nworkloads: [layernorm_gelu]\nbackends: [eager]\n")
    shifted = tmp_path / "b.yaml"
    shifted.write_text("device: cpu\nworkloads:\n  - name: layernorm_gelu\n    init:\n"
                       "      x: {dist: normal, mean: 1.0e4, std: 1}\nbackends: [eager]\n")
    (a,), (b,) = (plan_cases(*resolve(str(p)), "cpu") for p in (default, shifted))
    assert a.case_id == b.case_id  # the same workload...
    assert a.bound_graph().digest() != b.bound_graph().digest()  # ...but a different case: the inputs differ
    assert describe_inputs(b.bound_graph())["x"] == "normal(mean=10000, std=1)"
    x = make_inputs(b.bound_graph(), 0, "cpu")[0]
    assert abs(float(x.double().mean()) - 1e4) < 0.05


def test_per_workload_dtypes_replace_the_configs(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("device: cpu\ndtypes: [float32]\nworkloads:\n  - softmax\n  - {name: rmsnorm, dtypes: "
                    "[float16, bfloat16]}\nbackends: [eager]\npreset: smoke\n")
    cases = plan_cases(*resolve(str(path)), "cpu")
    assert [(c.workload, c.dtype) for c in cases] == [("softmax", "float32"), ("rmsnorm", "float16"),
                                                      ("rmsnorm", "bfloat16")]


# ---- files

def test_npy_file_relative_to_the_config(tmp_path):
    data = np.arange(64 * 512, dtype=np.float32).reshape(64, 512) / 7
    (tmp_path / "tensors").mkdir()
    np.save(tmp_path / "tensors" / "x.npy", data)
    path = write_config(tmp_path, "x: {file: tensors/x.npy}\n")
    a, b = inputs_of(path, seed=0)[0], inputs_of(path, seed=1)[0]
    assert torch.equal(a, torch.from_numpy(data)) and torch.equal(a, b)  # the file's bits, for every seed
    cfg, workloads = resolve(path)
    case = plan_cases(cfg, workloads, "cpu")[0]
    assert list(case.input_files.values()) == [str(tmp_path / "tensors" / "x.npy")]
    assert "tensors/x.npy" in describe_inputs(case.bound_graph(), case.input_files)["x"]


def test_npy_file_big_endian_and_cast(tmp_path):
    data = np.linspace(-1, 1, 64 * 512).reshape(64, 512).astype(">f8")
    np.save(tmp_path / "x.npy", data)
    x = inputs_of(write_config(tmp_path, "x: {file: x.npy, cast: true}\n", dtypes="[float16]"))[0]
    assert x.dtype == torch.float16 and torch.equal(x, torch.from_numpy(data.astype("<f8")).half())


def test_file_shape_mismatch_is_an_error_naming_file_line_and_field(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((64, 511), np.float32))
    err = config_error(write_config(tmp_path, "x: {file: x.npy}\n"))
    assert err.field == "workloads.0.init.x.file" and err.line == 10 and err.file.endswith("c.yaml")
    assert "x.npy holds shape [64, 511]; input 'x' is [64, 512]" in err.message


def test_file_dtype_mismatch_needs_cast(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((64, 512), np.float64))
    err = config_error(write_config(tmp_path, "x: {file: x.npy}\n", dtypes="[float32, float16]"))
    assert err.field == "workloads.0.init.x.file"
    assert "holds float64; this workload runs in float32, float16" in err.message and "cast: true" in err.message


def test_missing_file_and_unknown_suffix(tmp_path):
    err = config_error(write_config(tmp_path, "x: {file: nope.npy}\n"))
    assert err.field == "workloads.0.init.x.file" and "no such file" in err.message
    (tmp_path / "x.pt").write_bytes(b"\0" * 16)
    err = config_error(write_config(tmp_path, "x: {file: x.pt}\n"))
    assert "unknown tensor file type" in err.message


def test_npy_with_a_pickle_is_refused(tmp_path):
    np.save(tmp_path / "x.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    err = config_error(write_config(tmp_path, "x: {file: x.npy}\n"))
    assert err.field == "workloads.0.init.x.file" and "not a readable .npy" in err.message


def test_changed_file_fails_in_the_worker_not_silently(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((64, 512), np.float32))
    cfg, workloads = resolve(write_config(tmp_path, "x: {file: x.npy}\n"))
    case = plan_cases(cfg, workloads, "cpu")[0]
    np.save(tmp_path / "x.npy", np.full((64, 512), 2.0, np.float32))
    with pytest.raises(TensorFileError, match="changed since the config was loaded"):
        make_inputs(case.bound_graph(), 0, "cpu", case.input_files)


def test_file_identity_is_its_content_not_its_path(tmp_path):
    data = np.ones((64, 512), np.float32)
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        np.save(tmp_path / sub / "x.npy", data)
    graphs = []
    for sub in ("a", "b"):
        cfg, workloads = resolve(write_config(tmp_path / sub, "x: {file: x.npy}\n"))
        graphs.append(plan_cases(cfg, workloads, "cpu")[0].bound_graph())
    assert graphs[0].digest() == graphs[1].digest()
    np.save(tmp_path / "b" / "x.npy", data * 2)
    cfg, workloads = resolve(write_config(tmp_path / "b", "x: {file: x.npy}\n"))
    assert plan_cases(cfg, workloads, "cpu")[0].bound_graph().digest() != graphs[0].digest()


def test_init_survives_the_case_json(tmp_path):
    cfg, workloads = resolve(write_config(tmp_path, "x: {dist: mix, outlier_share: 0.1, outliers: rows}\n"
                                                "y: {values: [1, .nan], pad: 0}\n"))
    case = plan_cases(cfg, workloads, "cpu")[0]
    again = Case.from_json(json.loads(json.dumps(case.to_json())))
    g1, g2 = case.bound_graph(), again.bound_graph()
    assert g1.digest() == g2.digest()
    kind, params = parse_init(g2.inputs[0].attr("init"))
    assert kind == "mix" and params["outliers"] == "rows" and params["outlier_share"] == 0.1
    kind, params = parse_init(g2.inputs[1].attr("init"))
    assert kind == "values" and params["values"][0] == 1 and math.isnan(params["values"][1]) and params["pad"] == 0


def test_records_describe_every_input(tmp_path):
    np.save(tmp_path / "w.npy", np.ones((64, 512), np.float32))
    cfg, workloads = resolve(write_config(tmp_path, "x: {values: [1.0, 2.5], pad: 0}\ny: {file: w.npy}\n"))
    case = plan_cases(cfg, workloads, "cpu")[0]
    text = describe_inputs(case.bound_graph(), case.input_files)
    assert text["x"] == "values [1, 2.5] (2 given, padded with 0)"
    assert text["y"].startswith(f"file {tmp_path / 'w.npy'} sha256:") and len(text["y"].split(":")[-1]) == 12
    cfg, workloads = resolve(write_config(tmp_path, "x: {values: [3]}\n"))
    text = describe_inputs(plan_cases(cfg, workloads, "cpu")[0].bound_graph())
    assert text == {"x": "values [3] (1 given, repeated)", "y": "normal(mean=0, std=1)"}
