"""The process's one-time compile start, timed apart from the case's graph: a tiny graph unrelated to every
workload, compiled with the case's backend and options first, that cannot feed the case's cold compile."""
from types import SimpleNamespace

import pytest

from bakeoff.backends import get_backend
from bakeoff.harness.worker.process_setup import setup_graph, warm_up_process, without_artifacts
from bakeoff.harness.worker.compile_step import count_cache_files
from bakeoff.workloads.ir import bind
from bakeoff.workloads.suite import builtin_workloads


def test_the_setup_graph_is_no_workload_and_avoids_the_case_digest():
    digests = {bind(w.graph, dims, dtype).digest() for w in builtin_workloads().values()
               for dims in w.presets.values() for dtype in ("float32", "float16", "bfloat16")}
    graph = setup_graph("float32")
    assert graph.digest() not in digests and graph.is_bound() and graph.inputs[0].shape == (3, 5)
    other = setup_graph("float32", avoid_digest=graph.digest())
    assert other.digest() != graph.digest()


def _case(backend, options=None, device="cpu"):
    """What warm_up_process reads of a case: its device, and its options parsed as the planner parses them."""
    return SimpleNamespace(options=backend.parse_options(options), device=device)


def test_eager_setup_is_timed_and_a_failing_backend_only_costs_the_split():
    graph = builtin_workloads()["softmax"].graph
    graph = bind(graph, {"M": 4, "N": 6}, "float32")
    got = warm_up_process(get_backend("eager"), _case(get_backend("eager")), graph, count_cache_files)
    assert got["compile_process_setup_s"] > 0 and got["cache_files_setup"] == 0
    faulty = get_backend("faulty")
    bad = warm_up_process(faulty, _case(faulty, {"mode": "compile_error"}), graph, count_cache_files, phase="_warm")
    assert bad == {"compile_process_setup_warm_error": "RuntimeError: faulty backend: injected compile error"}


def test_artifact_options_are_not_passed_to_the_setup_graph(tmp_path):
    b = get_backend("onnxruntime")
    if b.available():
        pytest.skip(b.available())
    graph = bind(builtin_workloads()["softmax"].graph, {"M": 4, "N": 6}, "float32")
    case = _case(b, {"artifacts_dir": str(tmp_path), "opset": 21})
    assert without_artifacts(case.options) == b.parse_options({"opset": 21})   # the other options are kept
    got = warm_up_process(b, case, graph, count_cache_files)
    assert got["compile_process_setup_s"] > 0 and list(tmp_path.iterdir()) == []


def test_inductor_counts_only_its_own_compile_after_the_warm_up(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    from bakeoff.harness.worker.input_tensors import make_inputs

    backend = get_backend("inductor")
    graph = bind(builtin_workloads()["ew_sigmoid_relu"].graph, {"M": 5, "N": 7}, "float32")
    got = warm_up_process(backend, _case(backend), graph, count_cache_files)
    assert got["compile_process_setup_s"] > 0 and got["cache_files_setup"] > 0
    compiled = backend.compile(graph, [], "cpu", backend.Options())
    compiled(*make_inputs(graph, 0, "cpu"))
    # The warm-up's miss is not the case's: one graph compiled, one miss, and no hit from the warm-up's entries.
    assert compiled.info.cache_hit is False
    assert "fxgraph_cache hits=0 misses=1" in compiled.info.notes
