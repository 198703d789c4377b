"""The worker's phase log: gate waits are moved out of the phases they happened in (or before), and what the
worker wrote is read back, end mark included, even from a file cut short."""
from __future__ import annotations

import time

from bakeoff.harness.worker.phases import PhaseLog, read_phases


def test_gate_waits_before_and_inside_a_phase_are_counted_once_as_gate_wait(tmp_path):
    waited = [0.0]
    log = PhaseLog(str(tmp_path / "phases.txt"), lambda: waited[0])
    waited[0] = 5.0  # joined the gate before the first phase, after a 5 s wait
    with log.phase("imports"):
        time.sleep(0.05)
        waited[0] += 0.02  # a wait inside the phase (timed only with the gate's own tally here)
    log.add("process_start", 0.25)
    with log.phase("compile"):
        assert read_phases(tmp_path / "phases.txt").running("compile") is not None
    log.end()
    assert abs(log.totals["gate_wait"] - 5.02) < 1e-9
    assert 0.02 <= log.totals["imports"] < 0.05 + 0.02  # its span less the 0.02 s it waited
    read = read_phases(tmp_path / "phases.txt")
    phases, end = read.totals, read.end
    assert read.running("compile") is None and len(read.begins["compile"]) == 1
    assert phases.keys() == log.totals.keys() and end is not None and abs(end - time.time()) < 60
    assert all(abs(phases[k] - log.totals[k]) < 1e-5 for k in phases)  # written with microseconds


def test_a_cut_short_phase_file_gives_what_it_holds(tmp_path):
    (tmp_path / "p.txt").write_text("imports 1.5\nbegin compile 99.0\ncompile 2.0\nchecks 0.5\n"
                                    "begin compile 100.0\ncomp")
    read = read_phases(tmp_path / "p.txt")
    assert read.totals == {"imports": 1.5, "compile": 2.0, "checks": 0.5} and read.end is None
    assert read.running("compile") == 100.0  # the second compile began and never ended
    missing = read_phases(tmp_path / "missing.txt")
    assert missing.totals == {} and missing.end is None


def test_time_between_phases_is_named_and_the_phases_cover_the_worker(tmp_path):
    """What the worker does outside every phase is `between_phases`, less the gate waits there; a phase inside
    another adds none; phases, waits and time between sum to the log's span."""
    waited = [0.0]
    t0 = time.perf_counter()
    log = PhaseLog(str(tmp_path / "phases.txt"), lambda: waited[0])
    time.sleep(0.03)  # outside any phase
    with log.phase("inputs"):
        time.sleep(0.01)
    time.sleep(0.04)
    waited[0] += 0.02  # a gate wait outside any phase (the sleep above stands for part of it)
    log.take_gate_wait()
    with log.phase("timing"):
        time.sleep(0.01)
        with log.phase("profiling"):  # nested: its time is already the outer phase's
            time.sleep(0.01)
    log.end()
    span = time.perf_counter() - t0
    between = log.totals["between_phases"]
    assert 0.03 + 0.04 - 0.02 <= between < 0.03 + 0.04 - 0.02 + 0.03, log.totals
    named = sum(v for k, v in log.totals.items() if k != "profiling")
    assert abs(named - span) < 0.005, (log.totals, span)
    assert abs(read_phases(tmp_path / "phases.txt").totals["between_phases"] - between) < 1e-5
