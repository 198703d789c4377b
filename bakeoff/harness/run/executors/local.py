"""The local executor: `--jobs N` slots on this host, each a thread that runs one worker at a time.

The threads only wait on their worker subprocess; the main thread receives every result and alone writes
the store. A case that runs out of memory on a device other slots share may have lost to their memory, not
its own: it runs again once every slot is done, with the device to itself, and that record (whatever its
status) says so in `rerun_alone_reason`; so does a case whose warm compile ran out of memory there
(docs/SCALING.md, "Out of memory beside other workers"). On stop (Ctrl-C) the workers in flight are killed and their
results dropped: a killed case has no record and runs again on resume. Each slot keeps pre-started
workers getting ready for its next worker process (supervise/prestart.py); `prestart=False` starts every worker
fresh.
"""
from __future__ import annotations

import queue
import shutil
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

from bakeoff.harness.supervise.case_process import Workers, execute_case, references_dir
from bakeoff.harness.plan.cases import Case
from bakeoff.harness.plan.order import longest_first
from bakeoff.harness.supervise.prestart import Prestarter
from bakeoff.harness.supervise.slots import Slot
from bakeoff.harness.measure.environment import environment
from bakeoff.harness.worker.errors import mentions_oom

RESULT_POLL_S = 0.2  # the main thread wakes this often (seconds), so Ctrl-C is handled at once


def _out_of_memory(record: dict[str, Any]) -> bool:
    """Whether the case ran out of memory, or its warm compile did (a case ok without its warm figures)."""
    return record.get("status") == "oom" or (
        record.get("status") in ("ok", "mismatch") and mentions_oom(str(record.get("warm_error") or "")))


class LocalExecutor:
    """Cases over `slots` (with two or more, longest first: plan/order.py), each slot taking the next case
    when its worker ends."""

    def __init__(self, slots: list[Slot], prestart: bool = True) -> None:
        self.slots = slots
        self.prestart = prestart
        self.workers = Workers()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._results: queue.Queue = queue.Queue()
        self._work_dir: Path | None = None

    def run(self, cases: list[Case], work_dir: Path,
            on_start: Callable[[Case], None] | None = None) -> Iterator[tuple[Case, dict[str, Any]]]:
        self._work_dir = work_dir
        pending: queue.Queue[Case] = queue.Queue()
        for case in longest_first(cases) if len(self.slots) > 1 else cases:  # plan/order.py
            pending.put(case)
        results = self._results
        self._threads = [threading.Thread(target=self._slot_loop, args=(slot, pending, results, work_dir, on_start),
                                          name=f"slot-{slot.label}", daemon=True) for slot in self.slots]
        for thread in self._threads:
            thread.start()
        again: list[tuple[Case, dict[str, Any], Slot, int]] = []
        for _ in cases:
            item = self._next(results)
            if isinstance(item, BaseException):
                raise item
            case, record = item
            slot = next((s for s in self.slots if s.label == record.get("worker")), None)
            sharers = sum(1 for s in self.slots if s.gate == slot.gate) if slot and slot.gate else 1
            if sharers > 1 and _out_of_memory(record):
                again.append((case, record, slot, sharers))
            else:
                yield item
        for thread in self._threads:  # every other case has ended: the device is free
            thread.join()
        for case, first, slot, sharers in again:
            if self._stop.is_set():
                return
            yield case, self._alone(case, first, slot, sharers, work_dir, on_start)

    def _alone(self, case: Case, first: dict[str, Any], slot: Slot, sharers: int, work_dir: Path,
               on_start: Callable[[Case], None] | None) -> dict[str, Any]:
        """Run `case` again on `slot` (which `sharers` slots share) while no other worker runs, no spares
        either; `first` is the record of its first run."""
        if on_start:
            on_start(case)
        record = execute_case(case, work_dir, slot=slot, workers=self.workers, prestarter=None, more_cases=False)
        what, why = (("run", first.get("reason")) if first.get("status") == "oom" else
                     ("warm compile", first.get("warm_error")))
        record["rerun_alone_reason"] = (f"its first {what} ran out of memory while {sharers - 1} other slots shared "
                                        f"the device ({str(why or '')[:300]}); this is a second run with the device "
                                        "to itself")
        return record

    def _next(self, results: queue.Queue) -> Any:
        while True:
            try:
                return results.get(timeout=RESULT_POLL_S)
            except queue.Empty:
                if not any(t.is_alive() for t in self._threads) and results.empty():
                    raise RuntimeError("every worker slot stopped with cases left") from None

    def _slot_loop(self, slot: Slot, pending: queue.Queue, results: queue.Queue, work_dir: Path,
                   on_start: Callable[[Case], None] | None = None) -> None:
        prestarter = Prestarter(self.workers.add, self.workers.discard) if self.prestart else None
        try:
            while not self._stop.is_set():
                try:
                    case = pending.get_nowait()
                except queue.Empty:
                    return
                try:
                    if on_start:
                        on_start(case)
                    record = execute_case(case, work_dir, slot=slot, workers=self.workers, prestarter=prestarter,
                                          more_cases=not pending.empty())
                except Exception as exc:  # a harness failure (disk full, ...), not a case failure: stop the run
                    results.put(exc)
                    return
                if self._stop.is_set():
                    return  # its worker was killed by stop(): not a result
                results.put((case, record))
        finally:
            if prestarter is not None:
                prestarter.close()

    def stop(self) -> None:
        """Kill every worker in flight (and any a slot starts after this); wait for the slots to end."""
        self._stop.set()
        self.workers.kill_all()
        for thread in self._threads:
            thread.join(timeout=30)

    def drain(self) -> list[tuple[Case, dict[str, Any]]]:
        """Results that ended before stop() but were not handed out yet."""
        out = []
        while True:
            try:
                item = self._results.get_nowait()
            except queue.Empty:
                return out
            if not isinstance(item, BaseException):
                out.append(item)

    def close(self) -> None:
        for thread in self._threads:
            thread.join(timeout=30)
        if self._work_dir is not None:  # the shared references are of this session only
            shutil.rmtree(references_dir(self._work_dir), ignore_errors=True)

    def environment(self, device: str) -> dict[str, Any]:
        """This host's environment: the workers run here."""
        return environment(device)

    def resume_options(self) -> str:
        return f" --jobs {len(self.slots)}" if len(self.slots) > 1 else ""
