"""benchmarks/inject_disturbance.py: the tables and verdicts judged on made-up records (with the fields a GPU run
writes), the narrowed config, the outsider's environment, and one dry run of the three phases on the CPU."""
from __future__ import annotations

import json

import pytest
import yaml

from benchmarks import inject_disturbance as inj
from benchmarks import inject_verdicts as iv

WINDOW = (1000.0, 2000.0)
OUTSIDER = "1 other process(es) used the GPU during timing (pid 4242)"
HOST_LOAD = "host load: other processes used 15 of 16 CPU(s) (94%, limit 10%) during timing"


def rec(backend: str = "inductor", workload: str = "gemm_bias_gelu", headline: str = "clean",
        speedup: str | None = "clean", host: str = "clean", method: str = "cupti-span",
        windows: list | None = None, **fields) -> dict:
    """An ok record of a GPU case, timed inside WINDOW unless `windows` says otherwise."""
    return {"backend": backend, "workload": workload, "dtype": "bfloat16", "status": "ok",
            "headline_method": method, "headline_quality": headline, "speedup_quality": speedup,
            "host_quality": host, "timing_windows_epoch_s": [[1100.0, 1105.0]] if windows is None else windows,
            "headline_noise_reasons": [OUTSIDER] if headline == "noisy" else [],
            "speedup_noise_reasons": [OUTSIDER] if speedup == "noisy" else ([] if speedup else None),
            "host_noise_reasons": [HOST_LOAD] if host == "noisy" else [], **fields}


def phase(name: str, records: list[dict], window: tuple | None = WINDOW) -> iv.Phase:
    return iv.Phase(name, "sqlite:///x.db", "run", None if name == "quiet" else window, records=records)


# --- the outsider phase -----------------------------------------------------------------------------------------

def test_outsider_holds_when_every_overlapping_case_is_noisy():
    recs = [rec("eager", headline="noisy", speedup=None), rec(headline="noisy", speedup="noisy")]
    v = iv.verdict(phase("outsider", recs))
    assert v["ok"] is True and v["failing"] == []
    assert "2 of the 2 ok cases" in v["text"]


def test_outsider_fails_on_an_overlapping_case_marked_clean():
    recs = [rec(headline="noisy", speedup="noisy"), rec("xla", headline="clean", speedup="clean")]
    v = iv.verdict(phase("outsider", recs))
    assert v["ok"] is False
    assert v["failing"] == ["xla gemm_bias_gelu bfloat16: headline clean, speedup clean; NVML saw no outsider"]


def test_outsider_fails_on_a_noisy_headline_with_a_clean_speedup():
    seen = rec(headline="noisy", speedup="clean", gpu_other_processes=[{"pid": 4242, "sm_util_pct": 80}])
    v = iv.verdict(phase("outsider", [seen]))
    assert v["ok"] is False and v["failing"][0].endswith("speedup clean; NVML saw pid 4242")
    blind = rec(headline="clean", gpu_process_error="NVML unavailable")
    assert iv.verdict(phase("outsider", [blind]))["failing"][0].endswith("NVML saw no outsider (NVML unavailable)")


def test_outsider_ignores_cases_timed_outside_its_window_and_counts_cases_without_windows():
    before = rec("tritongen", windows=[[900.0, 999.0]])  # clean, but timed before the outsider started
    assert iv.verdict(phase("outsider", [before, rec(headline="noisy", speedup="noisy")]))["ok"] is True
    unknown = rec("xla", windows=[])  # no timing windows: the outsider ran across the whole run
    assert iv.verdict(phase("outsider", [unknown]))["ok"] is False


def test_a_phase_with_nothing_overlapping_is_not_judged():
    v = iv.verdict(phase("outsider", [rec(windows=[[10.0, 11.0]]), {"backend": "xla", "status": "failed"}]))
    assert v["ok"] is None


# --- the burners phase ------------------------------------------------------------------------------------------

def test_burners_hold_with_noisy_host_figures_clean_device_headlines_noisy_host_headlines():
    recs = [rec(host="noisy"), rec("xla", host="noisy", headline="noisy", method="host-clock+sync")]
    v = iv.verdict(phase("burners", recs))
    assert v["ok"] is True, v
    assert "device-timed headlines clean (or at clock) in 1 of 1" in v["text"]
    # a device-timed headline whose spread the calls' own clocks account for is no failure of the rule
    v = iv.verdict(phase("burners", recs + [rec("inductor", host="noisy", headline="clock")]))
    assert v["ok"] is True and "clean (or at clock) in 2 of 2" in v["text"], v


@pytest.mark.parametrize("bad, why", [
    (rec(host="clean"), "host figures clean"),
    (rec(host="noisy", headline="noisy"), "device-timed headline noisy"),
    (rec("xla", host="noisy", headline="clean", method="host-clock+sync"), "host-timed headline clean"),
])
def test_burners_fail_on_each_rule(bad, why):
    v = iv.verdict(phase("burners", [rec(host="noisy"), bad]))
    assert v["ok"] is False
    assert any(why in f for f in v["failing"]), v["failing"]


# --- the quiet phase --------------------------------------------------------------------------------------------

def test_quiet_allows_five_percent_noisy():
    clean = [rec() for _ in range(19)]
    assert iv.verdict(phase("quiet", clean + [rec(headline="noisy")]))["ok"] is True
    v = iv.verdict(phase("quiet", clean[:18] + [rec(headline="noisy"), rec(speedup="noisy")]))
    assert v["ok"] is False and len(v["failing"]) == 2
    assert "2 of 20 ok cases" in v["text"] and OUTSIDER in v["failing"][0]


# --- the table --------------------------------------------------------------------------------------------------

def test_rows_count_each_mark_per_backend():
    outsider = [{"pid": 7, "sm_util_pct": 90}, {"pid": 8, "sm_util_pct": 5, "gated_sibling": True}]
    recs = [rec("eager", headline="noisy", speedup=None, host="noisy", gpu_other_processes=outsider),
            rec(headline="noisy", speedup="noisy", gpu_other_processes=outsider[1:]),
            rec(gpu_process_error="NVML unavailable"), rec(windows=[[1.0, 2.0]]), {"backend": "inductor",
                                                                                     "status": "failed"}]
    rows = {r["backend"]: r for r in iv.rows_of(phase("outsider", recs))}
    assert rows["eager"] == {"backend": "eager", "ok": 1, "not_ok": 0, "headline_noisy": 1, "speedup_judged": 0,
                             "speedup_noisy": 0, "host_noisy": 1, "device_timed": 1, "overlap": 1, "nvml_outsider": 1,
                             "nvml_error": 0}
    ind = rows["inductor"]
    assert (ind["ok"], ind["not_ok"], ind["headline_noisy"], ind["speedup_judged"], ind["speedup_noisy"],
            ind["overlap"], ind["nvml_outsider"], ind["nvml_error"]) == (3, 1, 1, 3, 1, 2, 0, 1)


def test_reasons_count_by_kind_without_numbers():
    other = rec(headline="noisy", headline_noise_reasons=[OUTSIDER.replace("4242", "77")])
    reasons = iv.reasons_of(phase("outsider", [rec(headline="noisy"), other]))
    assert reasons["headline"] == {"N other process(es) used the GPU during timing": 2}


def test_report_renders_tables_and_a_failing_verdict():
    rep = iv.report([phase("quiet", [rec()]), phase("outsider", [rec("xla")])], dry_run=True)
    text = iv.render(rep)
    assert "verdict PASS quiet" in text and "verdict FAIL outsider" in text
    assert "xla gemm_bias_gelu bfloat16: headline clean" in text
    assert "cannot show the GPU rule" in text
    json.dumps(rep)  # the JSON written beside the stores


# --- the config, the outsider ---------------------------------------------------------------------------------

def test_config_is_narrowed(tmp_path):
    dst = tmp_path / "c.yaml"
    inj.write_config(inj.REPO / "configs/h200.yaml", dst, ["rmsnorm", "attention"], ["eager", "xla"], ["bfloat16"])
    cfg = yaml.safe_load(dst.read_text())
    assert cfg["workloads"] == ["rmsnorm", "attention"] and list(cfg["backends"]) == ["eager", "xla"]
    assert cfg["dtypes"] == ["bfloat16"] and cfg["compile"]["warm"] is False and cfg["device"] == "cuda"
    with pytest.raises(inj.CannotRun, match="not in the config: nosuch"):
        inj.write_config(inj.REPO / "configs/h200.yaml", dst, ["nosuch"], ["eager"], ["bfloat16"])


def test_outsider_environment_names_no_gate(monkeypatch):
    monkeypatch.setenv("BAKEOFF_GATE", "/bakeoff-gate-x")
    monkeypatch.setenv("BAKEOFF_PARENT_PID", "1")
    env = inj.outsider_env()
    assert not any(k.startswith("BAKEOFF_") for k in env) and env["PATH"]


def test_without_cuda_nothing_is_measured(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(inj, "_cuda", lambda: False)
    assert inj.main(["--out", str(tmp_path / "out")]) == 0
    assert "no CUDA device: nothing measured" in capsys.readouterr().out
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_dry_run_of_three_phases_on_the_cpu(tmp_path, capsys):
    """The three phases end to end at smoke sizes (about 25 s on two cores): stores, windows, tables, verdicts."""
    out = tmp_path / "inject"
    rc = inj.main(["--dry-run", "--out", str(out), "--total-s", "240", "--jobs", "2", "--burners", "1"])
    text = capsys.readouterr().out
    assert rc in (0, 1), text  # verdicts on a CPU are not the GPU rule; the phases must run
    rep = json.loads((out / "inject_disturbance.json").read_text())
    assert list(rep["phases"]) == ["quiet", "outsider", "burners"] and rep["dry_run"] is True
    for name, ph in rep["phases"].items():
        assert {r["backend"]: r["ok"] for r in ph["rows"]} == {"eager": 1, "xla": 1}, (name, ph)
        assert (out / f"{name}.db").exists()
    assert rep["phases"]["quiet"]["window"] is None
    start, end = rep["phases"]["outsider"]["window"]
    assert start < end and sum(r["overlap"] for r in rep["phases"]["outsider"]["rows"]) == 2
    assert "cannot show the GPU rule" in text and text.count("verdict ") == 3
    moved = tmp_path / "fetched"  # as the folder comes back from the GPU machine
    out.rename(moved)
    assert inj.main(["--tables", str(moved)]) == rc  # the stores read again give the same verdicts
    tables = capsys.readouterr().out
    assert [ln for ln in tables.splitlines() if ln.startswith("verdict ")] == \
        [ln for ln in text.splitlines() if ln.startswith("verdict ")]
