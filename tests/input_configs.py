"""Shared by the input-spec tests: a config file with one inline workload whose inputs a test fills, and what
the planner and the worker make of it."""
from __future__ import annotations

import textwrap

import pytest
import torch

from bakeoff.harness.config.schema import ConfigError, parse_config
from bakeoff.harness.plan.workloads import resolve_workloads
from bakeoff.harness.plan.cases import Case, plan_cases
from bakeoff.harness.worker.input_tensors import make_inputs


def write_config(tmp_path, init: str, *, dims: str = "{M: 64, N: 512}", dtypes: str = "[float32]") -> str:
    """A config file in tmp_path with one inline workload `x + y` whose inputs get `init`."""
    body = textwrap.dedent(f"""\
        name: t
        device: cpu
        dtypes: {dtypes}
        workloads:
          - name: w
            expr: "x + y"
            inputs: {{x: [M, N], y: [M, N]}}
            shapes: [{dims}]
            init:
        """)
    text = body + textwrap.indent(textwrap.dedent(init), " " * 6) + "backends: [eager]\n"
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return str(path)


def resolve(path: str):
    """The config's Config and resolved workloads (on the CPU, smoke preset)."""
    cfg, where = parse_config(open(path).read(), path)
    return cfg, resolve_workloads(cfg, where, "smoke", "cpu")


def inputs_of(path: str, seed: int = 0, dtype_index: int = 0) -> list[torch.Tensor]:
    """The inputs the worker makes for the config's first case (through the case's JSON, as it travels)."""
    cfg, workloads = resolve(path)
    cases = plan_cases(cfg, workloads, "cpu")
    case = Case.from_json(cases[dtype_index].to_json())  # as the worker receives it
    return make_inputs(case.bound_graph(), seed, "cpu", case.input_files)


def config_error(path: str) -> ConfigError:
    """The ConfigError loading the config raises (the test fails if it loads)."""
    with pytest.raises(ConfigError) as info:
        resolve(path)
    return info.value
