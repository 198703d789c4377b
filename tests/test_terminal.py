"""What the terminal shows: the summary fits 100 columns with no value wrapped or cut, text that looks like
rich markup is printed as it is, csv export goes to stdout, and comparing a run with itself is said."""
from __future__ import annotations

import io
import json
import re

import pandas as pd
import pytest
from rich.console import Console

from conftest import bakeoff
from bakeoff.harness.cli.summary import fmt_ms, fmt_speedup, fold_at_commas, print_summary, terminal_summary
from bakeoff.results.store import Store
from bakeoff.workloads.suite import builtin_workloads

# A GPU-sized run as the default config plans it: every built-in workload at its `gpu` preset, two dtypes,
# eight backend labels (one of them skipped everywhere, as tensorrt is where it is not installed).
BACKENDS = ("eager", "inductor", "inductor-max", "tritongen", "xla", "iree", "onnxruntime", "tensorrt")
FAILURES = {("attention", "iree"): ("compile_error", "iree-compile: error: 'linalg.generic' op [dispatch 3] "
                                                     "inferred type(s) do not match"),
            ("softmax", "tritongen"): ("mismatch", "error vs fp64 beyond tolerance [p20–p80] [bold]not markup[/]"),
            ("mlp_block", "onnxruntime"): ("timeout", "worker ran past timeout_s=600"),
            ("rmsnorm", "xla"): ("runtime_error", "RESOURCE_EXHAUSTED: out of memory while allocating 17179869184 B")}


# More labels, with long names, than 100 columns hold side by side: the compact view must continue them.
MANY = BACKENDS + ("inductor-max-autotune", "xla-decomposed", "onnxruntime-cuda", "tritongen-wide-search")


def gpu_like_records(backends: tuple[str, ...] = BACKENDS) -> list[dict]:
    out = []
    for k, w in enumerate(builtin_workloads().values()):
        shape = ",".join(f"{d}={v}" for d, v in w.presets["gpu"].items())
        for dtype in ("bfloat16", "float16"):
            for j, label in enumerate(backends):
                status, reason = FAILURES.get((w.name, label), ("ok", None))
                if label == "tensorrt":
                    status, reason = "skipped", "tensorrt not installed (pip install tensorrt-cu13)"
                ms = 10 ** (k % 5 - 2) * (1 + j / 7) * 1.2345
                timed = status in ("ok", "mismatch")
                out.append({"case_id": f"{w.name}/{shape}/{dtype}/{label}", "workload": w.name, "shape": shape,
                            "dtype": dtype, "backend": label, "adapter": label.split("-")[0], "status": status,
                            "reason": reason, "latency_ms_median": ms if timed else None,
                            "latency_ms_p20": ms * 0.98 if timed else None,
                            "latency_ms_p80": ms * 1.03 if timed else None,
                            "speedup_vs_eager": (1.0 if label == "eager" else 1.2345 * 10 ** (j % 4 - 1)) if timed
                            else None,
                            "compile_s": 12.5 if timed else None, "compile_warm_s": 3.25 if timed else None,
                            "cache_hit_warm": True if timed else None, "err_rel_l2_vs_fp64": 2.5e-3,
                            "err_rel_l2_vs_eager": 1e-3, "err_ratio_vs_eager": 1.1})
    return out


def render(renderable, width: int = 100) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def values_of(record: dict) -> list[str]:
    """The strings the compact view must show whole for a record."""
    out = [record["workload"], record["backend"], *record["shape"].split(",")]
    if record["latency_ms_median"] is not None:
        out.append(fmt_ms(record["latency_ms_median"]))
    if record["status"] == "ok" and record["adapter"] != "eager":
        out.append(fmt_speedup(record["speedup_vs_eager"]))
    return out


@pytest.mark.parametrize("backends", [BACKENDS, MANY], ids=["8 labels", "12 labels"])
def test_compact_summary_fits_100_columns_and_splits_no_value(backends):
    records = gpu_like_records(backends)
    text = render(terminal_summary(records, title="run r1"))
    lines = text.splitlines()
    assert max(len(x) for x in lines) <= 100, max(lines, key=len)
    assert "…" not in text  # nothing was cut to fit
    tokens = {t for line in lines for t in re.split(r"\s+", line)}
    parts = {p for t in tokens for p in t.split(",")}  # shapes fold at their commas only
    for r in records:
        if r["backend"] == "tensorrt":
            continue
        for value in values_of(r):
            assert value in parts, (value, r["case_id"])  # whole, as one word: never wrapped or cut
    # The skipped-everywhere backend is a note, not a column of 'skipped'; failures are listed with reasons.
    assert "tensorrt: every case skipped: tensorrt not installed" in text
    assert "iree compile_error in 2 cases (attention [B=8,H=32,S=4096,Dh=128, bfloat16] and 1 more)" in text
    assert "[dispatch 3]" in text
    assert "[p20–p80] [bold]not markup[/]" in text  # text that looks like markup, printed as it is
    assert "✗ compile" in text and "✗ mismatch" in text and "✗ timeout" in text and "✗ runtime" in text


def test_compact_summary_continues_backends_that_do_not_fit():
    records = gpu_like_records()
    narrow = render(terminal_summary(records), width=60)
    assert max(len(x) for x in narrow.splitlines()) <= 60 and "…" not in narrow
    headers = [x.split() for x in narrow.splitlines() if x.startswith("case ")]
    assert len(headers) >= 2  # the backends continue in a second table, each repeating the case column
    assert sorted(b for h in headers for b in h[1:]) == sorted(b for b in BACKENDS if b != "tensorrt")


def test_wide_table_prints_its_header_literally_at_its_natural_width():
    out = io.StringIO()
    console = Console(width=100, file=out)
    print_summary(console, gpu_like_records(), title="run r1", wide=True)
    text = out.getvalue()
    assert "latency ms [p20–p80]" in text and "compile s cold / warm" in text
    assert max(len(x) for x in text.splitlines()) > 100 and "…" not in text  # not squeezed into 100 columns
    assert "12.5 / 3.25 hit" in text


def test_fold_at_commas_only():
    assert fold_at_commas("B=8,H=32,S=4096,Dh=128", 12) == "B=8,H=32,\nS=4096,\nDh=128"
    assert fold_at_commas("M=16384,N=4096", 20) == "M=16384,N=4096"
    assert fold_at_commas("VERYLONGNAME=1", 4) == "VERYLONGNAME=1"  # a part longer than the width stays whole
    assert [fmt_ms(x) for x in (0.0123456, 4.5678, 1234.5, 0.00001234)] == ["0.0123", "4.57", "1234", "0.0000123"]


@pytest.fixture(scope="module")
def store_with_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("terminal")
    db = f"sqlite:///{work / 't.db'}"
    store = Store(db)
    run_id = store.create_run(config_name="gpu-like", config_path=None, config_text="", device="cuda:0",
                              environment={"gpu_name": "NVIDIA H200 [SXM]"}, n_cases=0)
    for r in gpu_like_records():
        store.add_record(run_id, r)
    store.finish_run(run_id, "complete")
    return work, db, run_id


@pytest.mark.parametrize("columns", [100, 80])
def test_show_fits_the_terminal_through_the_cli(store_with_run, columns):
    work, db, run_id = store_with_run
    proc = bakeoff("show", run_id, "--db", db, cwd=work, check=True, columns=columns)
    lines = proc.stdout.splitlines()
    assert max(len(x) for x in lines) <= columns and "…" not in proc.stdout
    # The header breaks between its fields only: the GPU's name (with brackets, shown as they are) stays whole.
    assert any("device cuda:0 (NVIDIA H200 [SXM])" in x for x in lines[:3]), lines[:3]
    assert lines[0].startswith(f"run {run_id} (complete)")
    wide = bakeoff("show", run_id, "--wide", "--db", db, cwd=work, check=True, columns=columns)
    assert "latency ms [p20–p80]" in wide.stdout


def test_export_csv_goes_to_stdout_and_a_file_is_named_on_stderr(store_with_run, tmp_path):
    work, db, run_id = store_with_run
    proc = bakeoff("export", run_id, "--format", "csv", "--db", db, cwd=work, check=True)
    frame = pd.read_csv(io.StringIO(proc.stdout))
    assert len(frame) == len(gpu_like_records()) and proc.stderr == ""
    assert json.loads(bakeoff("export", run_id, "--db", db, cwd=work, check=True).stdout)[0]["run_id"] == run_id
    out = tmp_path / "r.csv"
    proc = bakeoff("export", run_id, "--format", "csv", "-o", str(out), "--db", db, cwd=work, check=True)
    assert proc.stdout == "" and f"wrote {len(frame)} records of run {run_id} to {out} (csv" in proc.stderr
    assert pd.read_csv(out).equals(frame)
    parquet = bakeoff("export", run_id, "--format", "parquet", "--db", db, cwd=work)
    assert parquet.returncode == 2 and "needs -o FILE" in parquet.stderr


def test_compare_says_when_a_run_is_compared_with_itself(store_with_run):
    work, db, run_id = store_with_run
    proc = bakeoff("compare", run_id, "latest", "--format", "json", "--db", db, cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert f"are the same run, {run_id}: it is compared with itself" in proc.stderr
    json.loads(proc.stdout)  # stdout stays the comparison alone


def test_error_messages_print_brackets_as_they_are(monkeypatch):
    import typer

    from bakeoff.harness.cli import common

    out = io.StringIO()
    monkeypatch.setattr(common, "err_console", Console(file=out, width=100))
    with pytest.raises(typer.Exit) as exit_info:
        common.fail("c.yaml:3: timing.budget_s [p20–p80] must be > 0, not [bold]-1[/]")
    assert exit_info.value.exit_code == 2
    assert out.getvalue() == "error: c.yaml:3: timing.budget_s [p20–p80] must be > 0, not [bold]-1[/]\n"


def test_compare_says_noise_reasons_once_when_both_sides_share_them_and_cuts_between_words():
    from types import SimpleNamespace

    from bakeoff.results.report.compare_format import NOISE_CHARS, _noise_text

    reasons = "; ".join(f"host load: the timing thread waited for a CPU {k}% of the timing window" for k in range(9))
    same = _noise_text(SimpleNamespace(noisy=[f"base: {reasons}", f"candidate: {reasons}"], regressed=False))
    assert same.startswith(" (noisy: base and candidate: host load: the timing thread waited") and "; candidate:" not in same
    assert _noise_text(SimpleNamespace(noisy=[f"candidate: {reasons}", f"base: {reasons}"], regressed=False)) == same
    assert same.endswith(" …)") and len(same) <= NOISE_CHARS + len(" (noisy: )")
    words = set(reasons.replace(";", " ").split()) | {"base", "and", "candidate:", "…", "noisy:"}
    assert all(w in words for w in same.strip(" ()").replace(";", " ").split()), same  # no word cut in half
    one = _noise_text(SimpleNamespace(noisy=["candidate: backend IQR/median 0.2"], regressed=True))
    assert one == " (rests on a noisy measurement: candidate: backend IQR/median 0.2)"
