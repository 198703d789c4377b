"""A case carries its backend's options parsed: each label's options are parsed once when the run is planned,
every case of the label shares that instance, a case crossing into a worker as JSON is parsed once where it is
read, and adapters receive the instance. The record keeps the options as the config wrote them; the options
digest has every default filled in."""
from __future__ import annotations

import json

import pytest

from bakeoff.backends import Backend, backend_class, get_backend
from bakeoff.backends.inductor import InductorOptions
from bakeoff.backends.options import NoOptions, OptionsError
from bakeoff.harness.config.schema import parse_config
from bakeoff.harness.plan.cases import Case, plan_cases
from bakeoff.harness.plan.workloads import resolve_workloads
from bakeoff.harness.run.assemble import case_fields

CONFIG = """
name: opts
device: cpu
preset: smoke
dtypes: [float32]
workloads: [softmax, ew_sigmoid_relu]
backends:
  eager: {}
  inductor: {mode: default}
  plain: {backend: inductor}
  tuned: {backend: inductor, mode: max-autotune, fullgraph: false}
"""


def _plan(monkeypatch=None) -> tuple[list[Case], list[str]]:
    """The config's cases, and the backend of each `parse_options` call that parsed a mapping meanwhile."""
    cfg, where = parse_config(CONFIG, "<opts>")
    workloads = resolve_workloads(cfg, where, "smoke", "cpu")
    parsed: list[str] = []
    if monkeypatch is not None:
        real = Backend.parse_options.__func__

        def counting(cls, options):
            if not isinstance(options, cls.Options):
                parsed.append(cls.name)
            return real(cls, options)

        monkeypatch.setattr(Backend, "parse_options", classmethod(counting))
    return plan_cases(cfg, workloads, "cpu"), parsed


def test_each_label_is_parsed_once_and_its_cases_share_the_instance(monkeypatch):
    cases, parsed = _plan(monkeypatch)
    assert len(cases) == 8 and sorted(parsed) == ["eager", "inductor", "inductor", "inductor"]
    by_label = {c.label: [x for x in cases if x.label == c.label] for c in cases}
    for label, group in by_label.items():
        assert all(c.options is group[0].options for c in group), label
    assert isinstance(by_label["eager"][0].options, NoOptions)
    tuned = by_label["tuned"][0].options
    assert isinstance(tuned, InductorOptions) and (tuned.mode, tuned.fullgraph, tuned.dynamic) == \
        ("max-autotune", False, False)
    with pytest.raises(ValueError):  # frozen: what a case carries cannot change on its way to the worker
        tuned.mode = "default"


def test_the_record_keeps_the_options_as_written_and_digests_them_with_defaults():
    fields = {c.label: case_fields(c) for c in _plan()[0] if c.workload == "softmax"}
    assert fields["inductor"].options == {"mode": "default"} and fields["plain"].options == {}
    assert fields["tuned"].options == {"mode": "max-autotune", "fullgraph": False}   # `backend:` is not an option
    assert fields["eager"].options == {}
    # {} and {mode: default} ran with the same options: one digest; another mode is another digest
    assert fields["inductor"].options_digest == fields["plain"].options_digest != fields["tuned"].options_digest


def test_a_case_crosses_to_a_worker_as_json_and_is_parsed_once_there(monkeypatch):
    case = next(c for c in _plan()[0] if c.label == "tuned")
    text = case.to_json()
    assert json.loads(text)["options"] == {"mode": "max-autotune", "fullgraph": False}
    calls = []
    real = Backend.parse_options.__func__
    monkeypatch.setattr(Backend, "parse_options", classmethod(lambda cls, o: calls.append(o) or real(cls, o)))
    back = Case.from_json(text)
    assert calls == [{"mode": "max-autotune", "fullgraph": False}]
    assert isinstance(back.options, InductorOptions) and back.options == case.options
    assert back.options_given == case.options_given
    # what the worker received is what it runs: a value the backend refuses ends there, naming it
    bad = json.loads(text)
    bad["options"]["mode"] = 3
    with pytest.raises(OptionsError, match="inductor: mode: Input should be a valid string"):
        Case.from_json(json.dumps(bad))


def test_the_backend_api_takes_the_parsed_options_not_a_mapping():
    from bakeoff.workloads.ir import bind
    from bakeoff.workloads.suite import builtin_workloads

    graph = bind(builtin_workloads()["softmax"].graph, {"M": 4, "N": 8}, "float32")
    eager = get_backend("eager")
    with pytest.raises(TypeError, match=r"instance of NoOptions, not dict: parse a mapping with "
                                        r"EagerBackend.parse_options"):
        eager.compile_case(graph, [], "cpu", {})
    assert eager.compile_case(graph, [], "cpu", eager.parse_options(None)) is not None
    inductor = backend_class("inductor")
    assert inductor.compile_times_on_device(inductor.parse_options({"mode": "max-autotune"})) == \
        "mode max-autotune times candidate kernels on the device"
