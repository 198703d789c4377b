"""Each backend's typed options: every field documented with a type and a default, unknown keys and
coercions refused, defaults filled in; and `bakeoff list backends --options` prints them all."""
from __future__ import annotations

import pytest

from conftest import bakeoff
from bakeoff.backends import HIDDEN, REGISTRY, backend_class
from bakeoff.backends.options import BackendOptions, option_rows

ALL = list(REGISTRY) + list(HIDDEN)


@pytest.mark.parametrize("name", ALL)
def test_every_option_is_typed_documented_and_defaulted(name):
    model = backend_class(name).Options
    assert issubclass(model, BackendOptions)
    for option, kind, default, description in option_rows(model):
        assert kind and default != "(required)" and description, (name, option)
    assert backend_class(name).parse_options({}) == model() and backend_class(name).parse_options(None) == model()


@pytest.mark.parametrize("name", ALL)
def test_an_unknown_option_is_refused_naming_it(name):
    with pytest.raises(ValueError, match=rf"{name}: unknown option 'definitely_not_an_option'"):
        backend_class(name).parse_options({"definitely_not_an_option": 1})


@pytest.mark.parametrize("name,options,needle", [
    ("inductor", {"dynamic": "yes"}, "dynamic: Input should be a valid boolean"),
    ("inductor", {"fullgraph": 1}, "fullgraph: Input should be a valid boolean"),
    ("tritongen", {"max_row_block": "64"}, "max_row_block: Input should be a valid integer"),
    ("tritongen", {"max_row_block": 0}, "max_row_block: Input should be greater than or equal to 1"),
    ("onnxruntime", {"opset": 17}, "opset: Input should be greater than or equal to 18"),
    ("onnxruntime", {"intra_op_num_threads": 1.5}, "intra_op_num_threads"),
    ("tensorrt", {"workspace_mb": 0}, "workspace_mb"),
    ("faulty", {"scale": float("nan")}, "scale: Input should be a finite number"),
])
def test_bad_values_are_refused_not_coerced(name, options, needle):
    with pytest.raises(ValueError, match=needle):
        backend_class(name).parse_options(options)


def test_defaults_fill_in_and_equal_options_compare_equal():
    inductor = backend_class("inductor")
    assert inductor.parse_options({}) == inductor.parse_options({"mode": "default"})
    assert inductor.parse_options({}) != inductor.parse_options({"mode": "max-autotune"})
    parsed = inductor.parse_options({"mode": "max-autotune"})
    assert inductor.parse_options(parsed) is parsed   # an instance of the model is not parsed again
    opts = backend_class("onnxruntime").parse_options({"opset": 20})
    assert (opts.opset, opts.graph_optimization_level, opts.intra_op_num_threads) == (20, "all", None)


def test_list_backends_options_prints_every_builtin_option(tmp_path):
    out = " ".join(bakeoff("list", "backends", "--options", cwd=tmp_path, check=True).stdout.split())
    for name in REGISTRY:
        for option, kind, default, _ in option_rows(backend_class(name).Options):
            assert f" {option} " in out and kind.split(",")[0] in out, (name, option)
    assert "builder_optimization_level │ int, 0 <= x <= 5 │ 3" in out
    assert "'disable' | 'basic' | 'extended' | 'all'" in out
    assert "faulty" not in out   # test-only backends stay hidden
