"""A run's cases are shown in the config's order (workloads, dtypes, backends as it lists them), whatever order
the workers finished them in."""
from __future__ import annotations

from bakeoff.results.case_order import config_lists, in_config_order

CONFIG = """
name: t
dtypes: [bfloat16, float32]
workloads: [softmax, {name: rmsnorm, preset: smoke}, mlp_block]
backends:
  eager: {}
  xla: {}
  iree: {}
"""


def rec(workload: str, dtype: str, backend: str, shape: str = "M=8") -> dict:
    return {"workload": workload, "dtype": dtype, "backend": backend, "shape": shape}


def key(r: dict) -> tuple:
    return r["workload"], r["dtype"], r["backend"]


def test_completion_order_becomes_the_configs():
    done = [rec("mlp_block", "float32", "xla"), rec("softmax", "float32", "eager"), rec("rmsnorm", "bfloat16", "iree"),
            rec("softmax", "bfloat16", "xla"), rec("softmax", "bfloat16", "eager"), rec("mlp_block", "bfloat16", "iree")]
    assert [key(r) for r in in_config_order(done, CONFIG)] == [
        ("softmax", "bfloat16", "eager"), ("softmax", "bfloat16", "xla"), ("softmax", "float32", "eager"),
        ("rmsnorm", "bfloat16", "iree"), ("mlp_block", "bfloat16", "iree"), ("mlp_block", "float32", "xla")]
    assert config_lists(CONFIG) == (["softmax", "rmsnorm", "mlp_block"], ["bfloat16", "float32"],
                                    ["eager", "xla", "iree"])


def test_what_the_config_does_not_list_keeps_its_first_seen_order_after_the_rest():
    done = [rec("extra", "float16", "tvm"), rec("softmax", "float16", "eager"), rec("softmax", "float32", "eager"),
            rec("softmax", "bfloat16", "eager", shape="M=16"), rec("softmax", "bfloat16", "eager")]
    got = [(r["workload"], r["dtype"], r["shape"]) for r in in_config_order(done, CONFIG)]
    assert got == [("softmax", "bfloat16", "M=8"), ("softmax", "float32", "M=8"), ("softmax", "float16", "M=8"),
                   ("softmax", "bfloat16", "M=16"), ("extra", "float16", "M=8")]
    # no readable config: grouped by workload, shape, dtype and backend in first-seen order
    grouped = [(r["workload"], r["dtype"], r["shape"]) for r in in_config_order(done, "not: [yaml")]
    assert grouped == [("extra", "float16", "M=8"), ("softmax", "float16", "M=8"), ("softmax", "float32", "M=8"),
                       ("softmax", "bfloat16", "M=8"), ("softmax", "bfloat16", "M=16")]
    assert in_config_order(done, None) == in_config_order(done, "not: [yaml")
