"""The worker's phase log: gate waits are moved out of the phases they happened in (or before), and what the
worker wrote is read back, end mark included, even from a file cut short."""
from __future__ import annotations

import time

from bakeoff.harness.run.worker.phases import PhaseLog, read_phases


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
