"""Inductor's CPU start-up (bakeoff/backends/inductor_cpu.py): what the run hands its workers, and when not."""
from __future__ import annotations

import json
import os

import pytest

from bakeoff.backends import inductor_cpu, inductor_cpu_cache
from bakeoff.backends.inductor import InductorBackend

ISAS = ["avx512 avx512_vnni amx_tile", "avx512", "avx2"]
PASSED = {"torch": "2.13.0", "compiler": "gcc version 12", "header_dir": "/tmp/h", "trusted": ISAS,
          "picked": "avx512 avx512_vnni amx_tile (-mavx512f)", "base_checks": dict.fromkeys(ISAS, True),
          "seconds": 9.0}


def _env_for(monkeypatch, probe: dict) -> dict[str, str]:
    monkeypatch.setattr(inductor_cpu, "_probe", lambda: probe)
    return InductorBackend.worker_env("cpu")


def test_vec_isa_ok_is_handed_only_when_every_accepted_isa_passed_its_base_check(monkeypatch):
    env = _env_for(monkeypatch, PASSED)
    assert env[inductor_cpu.ENV_VEC_ISA_OK] == "1"
    assert json.loads(env[inductor_cpu.ENV_PROBE]) == PASSED  # what the workers' notes quote
    one_failed = {**PASSED, "base_checks": {**PASSED["base_checks"], "avx512": False}}
    unchecked = {**PASSED, "base_checks": {ISAS[0]: True}}  # an accepted ISA whose base check did not run
    for probe in (one_failed, unchecked, {**PASSED, "trusted": [], "base_checks": {}}, {"error": "exited 1"},
                  {**PASSED, "user_vec_isa_ok": True, "base_checks": None}):
        env = _env_for(monkeypatch, probe)
        assert inductor_cpu.ENV_VEC_ISA_OK not in env, probe
        assert json.loads(env[inductor_cpu.ENV_PROBE]) == probe


def test_nothing_is_handed_on_a_gpu(monkeypatch):
    monkeypatch.setattr(inductor_cpu, "_probe", lambda: pytest.fail("probed for a CUDA case"))
    assert InductorBackend.worker_env("cuda:0") == {}


def test_a_failed_probe_is_an_error_entry_not_an_exception(monkeypatch, tmp_path):
    monkeypatch.setenv(inductor_cpu_cache.ENV_CACHE, str(tmp_path / "kept"))  # nothing kept to read back
    inductor_cpu._probe.cache_clear()
    monkeypatch.setattr(inductor_cpu.sys, "executable", str(tmp_path / "no-such-python"))
    assert inductor_cpu._probe()["error"].startswith("the probe did not start")
    inductor_cpu._probe.cache_clear()
    monkeypatch.setattr(inductor_cpu.sys, "executable", "/bin/false")
    assert inductor_cpu._probe()["error"].startswith("the probe exited 1")
    inductor_cpu._probe.cache_clear()


def test_the_probe_is_kept_per_machine_and_probed_again_when_the_key_changes(monkeypatch, tmp_path):
    """A run reads back the answer an earlier run of this machine kept under the same key, and probes again
    when the CPU, the compiler or an Inductor variable differs; a failed probe is never kept, and
    BAKEOFF_PROBE_CACHE=0 keeps nothing."""
    probed: list[dict] = []
    answer = [PASSED]

    def run_probe() -> dict:
        probed.append(answer[0])
        return answer[0]

    def probe() -> dict:
        inductor_cpu._probe.cache_clear()  # a new run: the answer is cached per process
        return inductor_cpu._probe()

    monkeypatch.setattr(inductor_cpu, "_run_probe", run_probe)
    monkeypatch.setenv(inductor_cpu_cache.ENV_CACHE, str(tmp_path / "kept"))
    try:
        assert probe() == PASSED and len(probed) == 1
        kept = probe()  # the next run reads it back, and says from where
        assert len(probed) == 1 and kept["cached"]["file"].startswith(str(tmp_path / "kept"))
        assert {k: v for k, v in kept.items() if k != "cached"} == PASSED and kept["cached"]["probed_at"]
        real_cpu = inductor_cpu_cache._cpu()
        monkeypatch.setattr(inductor_cpu_cache, "_cpu", lambda: {**real_cpu, "flags": "sse2"})  # another CPU
        assert "cached" not in probe() and len(probed) == 2
        monkeypatch.setenv("CXX", "/bin/true")  # another compiler
        assert "cached" not in probe() and len(probed) == 3
        monkeypatch.setenv("TORCHINDUCTOR_MAX_AUTOTUNE", "1")  # an Inductor variable
        answer[0] = {"error": "the probe exited 1"}
        assert probe() == answer[0] and probe() == answer[0] and len(probed) == 5  # not kept: probed again
        monkeypatch.setenv(inductor_cpu_cache.ENV_CACHE, "0")
        answer[0] = PASSED
        assert probe() == PASSED and probe() == PASSED and len(probed) == 7
        assert len(list((tmp_path / "kept").glob(inductor_cpu_cache.FILE_PREFIX + "*.json"))) == 3
    finally:
        inductor_cpu._probe.cache_clear()


def test_a_kept_answer_is_quoted_with_its_file_and_date(monkeypatch):
    from torch._inductor import config

    kept = {**PASSED, "cached": {"file": "/k/inductor_cpu_probe-x.json", "probed_at": "2026-12-03T04:00:00+0000"}}
    monkeypatch.setattr(inductor_cpu, "_headers", {"why": "not shared: test"})
    monkeypatch.setenv(inductor_cpu.ENV_PROBE, json.dumps(kept))
    monkeypatch.setenv(inductor_cpu.ENV_VEC_ISA_OK, "1")
    with config.patch({"cpp.vec_isa_ok": True}):
        note = inductor_cpu.startup_notes()[0]
    assert note.startswith("cpp.vec_isa_ok=True (TORCHINDUCTOR_VEC_ISA_OK=1, set by the harness from this machine's "
                           "probe of 2026-12-03T04:00:00+0000, kept in /k/inductor_cpu_probe-x.json"), note
    assert "which took 9.0 s" in note


def test_worker_links_its_header_folder_to_the_runs_and_notes_it(monkeypatch, tmp_path):
    """In a worker: Inductor's header folder under the worker's own TMPDIR becomes a link to the probe's
    `header_dir`; the note says how many headers were there and how many this process built."""
    from torch._inductor import codecache

    shared, mine = tmp_path / "machine" / "precompiled_headers", tmp_path / "worker" / "precompiled_headers"
    shared.mkdir(parents=True)
    (shared / "a.h.gch").write_bytes(b"x")
    monkeypatch.setattr(codecache, "_HEADER_DIR", str(mine))
    monkeypatch.setenv(inductor_cpu.ENV_PROBE, json.dumps({**PASSED, "header_dir": str(shared)}))
    monkeypatch.setattr(inductor_cpu, "_headers", {})
    inductor_cpu.share_headers()
    assert mine.is_symlink() and os.path.realpath(mine) == os.path.realpath(shared)
    (mine / "b.h.gch").write_bytes(b"y")  # what Inductor would build through the link
    assert (shared / "b.h.gch").exists()
    notes = inductor_cpu.startup_notes()
    assert "1 found there, 1 built by this process" in notes[1] and str(shared) in notes[1]


def test_worker_keeps_its_own_header_folder_when_one_exists(monkeypatch, tmp_path):
    from torch._inductor import codecache

    mine = tmp_path / "precompiled_headers"
    mine.mkdir()
    monkeypatch.setattr(codecache, "_HEADER_DIR", str(mine))
    monkeypatch.setenv(inductor_cpu.ENV_PROBE, json.dumps({**PASSED, "header_dir": str(tmp_path / "other")}))
    monkeypatch.setattr(inductor_cpu, "_headers", {})
    inductor_cpu.share_headers()
    assert not mine.is_symlink()
    assert "own temporary folder" in inductor_cpu.startup_notes()[1] and "already exists" in inductor_cpu.startup_notes()[1]


def test_isa_note_says_who_set_vec_isa_ok(monkeypatch):
    from torch._inductor import config

    monkeypatch.setattr(inductor_cpu, "_headers", {"why": "not shared: test"})
    monkeypatch.setenv(inductor_cpu.ENV_PROBE, json.dumps(PASSED))
    monkeypatch.setenv(inductor_cpu.ENV_VEC_ISA_OK, "1")
    with config.patch({"cpp.vec_isa_ok": True}):  # Inductor's own way (monkeypatch would break its config)
        assert "set by the harness from its once-per-run probe" in inductor_cpu.startup_notes()[0]
    with config.patch({"cpp.vec_isa_ok": None}):
        assert "Inductor checked every vector ISA in this process" in inductor_cpu.startup_notes()[0]
    monkeypatch.setenv(inductor_cpu.ENV_PROBE, json.dumps({**PASSED, "user_vec_isa_ok": True}))
    monkeypatch.delenv(inductor_cpu.ENV_VEC_ISA_OK)
    with config.patch({"cpp.vec_isa_ok": True}):
        assert "set by the environment" in inductor_cpu.startup_notes()[0]


def _answering(monkeypatch, probe: dict, handed: bool = True):
    """answer_extension_checks in this process over a fake build (every built program fails); returns the
    calls the fake saw. monkeypatch restores VecISA.check_build afterwards."""
    from torch._inductor import cpu_vec_isa

    built = []
    monkeypatch.setattr(cpu_vec_isa.VecISA, "check_build", lambda isa, code: built.append(code) and False)
    monkeypatch.setenv(inductor_cpu.ENV_PROBE, json.dumps(probe))
    if handed:
        monkeypatch.setenv(inductor_cpu.ENV_VEC_ISA_OK, "1")
    else:
        monkeypatch.delenv(inductor_cpu.ENV_VEC_ISA_OK, raising=False)
    monkeypatch.setattr(inductor_cpu, "_extensions", {})
    monkeypatch.setattr(inductor_cpu, "_headers", {"why": "not shared: test"})
    inductor_cpu.answer_extension_checks()
    return built


def test_an_extension_check_is_answered_only_for_the_same_isa_flags_and_program(monkeypatch):
    import torch
    from torch._inductor import cpu_vec_isa
    from bakeoff.backends.inductor_cpu_probe import check_key

    isa = cpu_vec_isa.VecAVX512()
    recorded = [{**check_key(isa, "int ok;"), "passed": True, "seconds": 0.5}]
    probe = {**PASSED, "torch": torch.__version__, "extension_checks": recorded}
    built = _answering(monkeypatch, probe)
    assert cpu_vec_isa.VecISA.check_build(isa, "int ok;") is True  # the probe's answer: nothing built
    assert built == []
    assert not cpu_vec_isa.VecISA.check_build(isa, "int other;")  # another program: built (the fake fails it)
    isa._arch_flags += " -mextra"  # the same program with other flags: built too
    assert not cpu_vec_isa.VecISA.check_build(isa, "int ok;")
    assert built == ["int other;", "int ok;"]
    with config_patch_vec_isa_ok(True):
        note = inductor_cpu.startup_notes()[2]
    assert "1 answered from the run's probe" in note and "2 built and loaded by this process" in note, note


def test_no_answers_without_the_handed_setting_or_for_another_torch(monkeypatch):
    import torch
    from torch._inductor import cpu_vec_isa
    from bakeoff.backends.inductor_cpu_probe import check_key

    isa = cpu_vec_isa.VecAVX512()
    recorded = [{**check_key(isa, "int ok;"), "passed": True, "seconds": 0.5}]
    for probe, handed, why in (
            ({**PASSED, "torch": torch.__version__, "extension_checks": recorded}, False, "did not hand over"),
            ({**PASSED, "torch": "0.0.1", "extension_checks": recorded}, True, "the probe ran torch 0.0.1"),
            ({**PASSED, "torch": torch.__version__}, True, "recorded no extension checks"),
            ({**PASSED, "torch": torch.__version__, "extension_checks": recorded,
              "base_checks": {ISAS[0]: False}}, True, "did not hand over")):
        built = _answering(monkeypatch, probe, handed)
        assert not cpu_vec_isa.VecISA.check_build(isa, "int ok;") and built == ["int ok;"], probe
        with config_patch_vec_isa_ok(True if handed else None):
            assert why in inductor_cpu.startup_notes()[2], (why, inductor_cpu.startup_notes()[2])


def config_patch_vec_isa_ok(value):
    from torch._inductor import config

    return config.patch({"cpp.vec_isa_ok": value})


def test_answered_checks_pick_the_isa_and_flags_that_checking_picks(tmp_path):
    """The real probe, then two fresh processes trusting the flags as a worker does: one builds every extension
    check, one takes the probe's answers. Inductor picks the same ISA with the same arch flags in both."""
    import subprocess
    import sys

    inductor_cpu._probe.cache_clear()
    env = inductor_cpu.cpu_startup_env()
    inductor_cpu._probe.cache_clear()
    probe = json.loads(env[inductor_cpu.ENV_PROBE])
    if inductor_cpu.ENV_VEC_ISA_OK not in env:
        pytest.skip(f"this machine's probe does not hand vec_isa_ok over: {probe}")
    assert probe["extension_checks"] is not None
    code = ("from bakeoff.backends import inductor_cpu as c; import os, sys\n"
            "if sys.argv[1] == '1': c.answer_extension_checks()\n"
            "from torch._inductor import cpu_vec_isa; isa = cpu_vec_isa.pick_vec_isa()\n"
            "print(str(isa) + ' | ' + isa.build_arch_flags() + ' | ' + repr(c._extensions))")
    out = []
    for answer in ("0", "1"):
        cache = tmp_path / f"cache{answer}"
        proc = subprocess.run([sys.executable, "-c", code, answer], capture_output=True, text=True, timeout=300,
                              env={**os.environ, **env, "TORCHINDUCTOR_CACHE_DIR": str(cache)})
        assert proc.returncode == 0, proc.stderr[-2000:]
        out.append(proc.stdout.strip().split(" | "))
    assert out[0][:2] == out[1][:2], out
    assert f"'answered': {len(probe['extension_checks'])}, 'built': 0" in out[1][2], out[1]
