"""The timing gate of one device: a cross-process reader-writer lock on files, with writers first.

Every worker process on a device holds the gate *shared* for its whole life (compiling, checking), and
*exclusively* only while it times (`time_case` in worker/stages.py). So a timing phase runs only when no other
worker process on that device is doing anything, and compiles overlap freely. Writers go first: a worker
waiting to time takes the turnstile, which stops new workers from entering, so timing is never starved by
a stream of compiles.

Lock files per device, `PREFIX.gate` and `PREFIX.turnstile` (and `PREFIX.timing`, below), locked with
fcntl (POSIX record locks): the kernel drops them when the process dies, however it dies, and forked
children never inherit them.
A worker never holds one lock while waiting for another except the turnstile, which is always taken
first; a timers_only timer's shared hold while it waits for `PREFIX.timing`, whose holders are timing
and wait for nothing; and an exclusive timer's gate while it waits for `PREFIX.compiling`, whose holders
wait for nothing before they drop it: so there is no deadlock. The time a worker spends waiting is written
to `wait_file`, so the orchestrator can leave it out of the worker's timeout.

The orchestrator passes the gate to a worker in the environment: BAKEOFF_GATE (the prefix),
BAKEOFF_GATE_WAIT (the wait file) and BAKEOFF_GATE_POLICY. Without a prefix the gate is a no-op.
With BAKEOFF_GATE_TRACE (a file), every gated process appends what it does with the locks, and which
phase it is in, one line per event (`EPOCH PID EVENT ...`): benchmarks/harness_overhead.py --gate-trace reads it to say
how long the device was timed, waited for, or idle, and which work held timers off.

Policies (`timing: {gate: ...}` in a config; `auto` is resolved per case, supervise/gate_policy.py, and the
policy each case used is its record's `gate_policy`, with `gate_policy_reason`). They differ only in what a
worker waits for when it times; every busy worker holds the gate shared whatever its own policy, so a
device may mix them and an exclusive timer still has the device alone:
- ``exclusive``: as above; nothing else runs on the device while the worker times.
- ``timers_only``: the worker keeps its shared hold and takes a third lock, `PREFIX.timing`, exclusively:
  it waits only for other timing phases (and for an exclusive timer, which holds the gate alone), while
  compiles, imports and checks of other workers go on.
- ``beside_compiles``: times as ``exclusive`` (no other worker's device work: inputs, eager baselines,
  references, checks, timing), but a worker of this policy leaves its shared hold while it does host work
  that launches no more than a lazy compiler's first run on the device: a compile by a compiler that times
  nothing on the device (`Backend.compile_times_on_device`), and a spare's imports. A compiler done before its
  first run (it names its compiler stages: IREE, ONNX Runtime, TensorRT) runs that first run inside the gate
  (`device_work`, worker/compile_step.py): it is device work alone, and may last a second. Meanwhile it holds a
  fourth lock, `PREFIX.compiling`, shared, so an ``exclusive`` timer (which takes it exclusively after the gate) still
  has the device and the host alone, while a ``beside_compiles`` timer does not wait for it.
  Starting host work goes through the turnstile, so a waiting exclusive timer is not starved either; host
  work ends by dropping `PREFIX.compiling` before rejoining the gate, so nothing waits while holding it.
  A compile that times candidates on the device but says which part does (Backend.marks_device_work:
  tritongen's config search) runs as host work and rejoins the gate for that part only (`device_work`); the
  candidates' timing takes the device alone (`device_work(alone=True)`, under every policy), as a timer does.
"""
from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, ContextManager, Iterator

ENV_PREFIX = "BAKEOFF_GATE"
ENV_WAIT_FILE = "BAKEOFF_GATE_WAIT"
ENV_POLICY = "BAKEOFF_GATE_POLICY"
ENV_TRACE = "BAKEOFF_GATE_TRACE"
POLICIES = ("exclusive", "timers_only", "beside_compiles")  # what a worker runs under; `auto` resolves to one


@dataclass
class Gate:
    """One process's handle on a device gate. Times are seconds; `windows` are (start, end) epoch seconds
    during which this process held the gate exclusively."""

    prefix: str
    wait_file: str | None = None
    policy: str = "exclusive"
    waited_s: float = 0.0
    windows: list[tuple[float, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"gate policy must be one of {', '.join(POLICIES)}, not {self.policy!r}")
        folder = Path(self.prefix).parent
        if not folder.exists():
            folder.mkdir(parents=True, exist_ok=True)
            _share(lambda: folder.chmod(0o1777))  # like /tmp: every user's workers meet here
        self._gate = _open_shared(self.prefix + ".gate")
        self._turnstile = _open_shared(self.prefix + ".turnstile")
        self._timing = _open_shared(self.prefix + ".timing")
        self._compiling = _open_shared(self.prefix + ".compiling")
        self._names = {self._gate: "gate", self._turnstile: "turnstile", self._timing: "timing",
                       self._compiling: "compiling"}
        self._host_working = False  # inside host_work: outside the gate, holding `compiling` shared
        trace = os.environ.get(ENV_TRACE)
        self._trace = os.open(trace, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666) if trace else None

    def note(self, event: str) -> None:
        """Append `event` to the trace (BAKEOFF_GATE_TRACE), one line written at once; no-op without one."""
        if self._trace is not None:
            os.write(self._trace, f"{time.time():.6f} {os.getpid()} {event}\n".encode())

    def _unlock(self, fd: int) -> None:
        fcntl.lockf(fd, fcntl.LOCK_UN)
        self.note(f"drop {self._names[fd]}")

    def _lock(self, fd: int, mode: int) -> None:
        """Take `mode` on `fd`, counting the time it takes as waiting."""
        held = f"{self._names[fd]} {'ex' if mode == fcntl.LOCK_EX else 'sh'}"
        try:
            fcntl.lockf(fd, mode | fcntl.LOCK_NB)
            self.note(f"got {held}")
            return
        except OSError:
            pass
        t0 = time.time()
        self.note(f"want {held}")
        self._report(waiting_since=t0)
        fcntl.lockf(fd, mode)
        self.note(f"got {held}")
        self.waited_s += time.time() - t0
        self._report(waiting_since=None)

    def _report(self, waiting_since: float | None) -> None:
        """Write 'WAITED_S WAITING_SINCE' (0 when not waiting) for the orchestrator, atomically."""
        if self.wait_file:
            tmp = self.wait_file + ".part"
            Path(tmp).write_text(f"{self.waited_s:.6f} {waiting_since or 0:.6f}\n")
            os.replace(tmp, self.wait_file)

    def enter_shared(self) -> None:
        """Join the device as a busy worker (waits while someone times exclusively or waits to)."""
        self._shared_past_turnstile(self._gate)

    def _shared_past_turnstile(self, fd: int) -> None:
        """Take `fd` shared through the turnstile, so a writer waiting for it exclusively goes first."""
        self._lock(self._turnstile, fcntl.LOCK_EX)
        try:
            self._lock(fd, fcntl.LOCK_SH)
        finally:
            self._unlock(self._turnstile)

    def leave_shared(self) -> None:
        """Stop being a busy worker (an idle pre-started worker must not hold off anyone's timing)."""
        self._unlock(self._gate)

    def rebind(self, wait_file: str | None, policy: str | None = None) -> None:
        """Start over for a new case in this process (a pre-started worker): report waits to `wait_file`,
        counting from zero, and time under the case's `policy`. The lock files stay open: POSIX locks belong
        to the process, and closing any descriptor of a locked file would drop them."""
        self.wait_file, self.waited_s, self.windows = wait_file, 0.0, []
        if policy:
            if policy not in POLICIES:
                raise ValueError(f"gate policy must be one of {', '.join(POLICIES)}, not {policy!r}")
            self.policy = policy

    @contextmanager
    def host_work(self) -> Iterator[bool]:
        """Under `beside_compiles`, do the body outside the gate (others may time meanwhile) and holding
        `PREFIX.compiling` shared (an `exclusive` timer still waits for it); yields True then. Under the other
        policies the body keeps the shared hold and this yields False. The caller must hold the gate
        shared on entry, and holds it again on exit."""
        if self.policy != "beside_compiles" or self._host_working:  # (nested: already outside)
            yield self._host_working
            return
        self._unlock(self._gate)
        self._enter_host_work()
        self._host_working = True
        try:
            yield True
        finally:
            self._host_working = False
            self._unlock(self._compiling)
            self.enter_shared()

    def _enter_host_work(self) -> None:
        self._shared_past_turnstile(self._compiling)

    @contextmanager
    def device_work(self, alone: bool = False) -> Iterator[bool]:
        """Inside host work (a compile outside the gate), rejoin the gate as a busy worker for the body: the
        part of the compile that runs work on the device to time it (Backend.marks_device_work); yields
        True then. Elsewhere the worker already holds the gate shared and this yields False. `compiling` is
        dropped before the gate is rejoined and taken again after, so nothing waits while holding it.
        `alone`: the body has the device to itself, from host work or from a shared hold, and yields True: it
        waits for every busy worker and holds new ones off, as a timer does (a config search's timing, which
        another case's inputs, references or search on the device would decide)."""
        if alone:
            with self._alone():
                yield True
            return
        if not self._host_working:
            yield False
            return
        self._unlock(self._compiling)
        self.enter_shared()
        try:
            yield True
        finally:
            self._unlock(self._gate)
            self._enter_host_work()

    @contextmanager
    def _alone(self) -> Iterator[None]:
        """The device alone for the body (no timing window recorded), then back to host work or the shared hold."""
        self._unlock(self._compiling if self._host_working else self._gate)
        with self._gate_alone(host_too=False):
            yield
        if self._host_working:
            self._enter_host_work()
        else:
            self.enter_shared()

    @contextmanager
    def exclusive(self) -> Iterator["Gate"]:
        """Time: under `exclusive`, leave the shared hold, wait until every other worker has left theirs, run
        the body, then rejoin as shared; under `timers_only`, keep the shared hold and wait only for other
        timing phases (an exclusive timer among them holds the gate alone, so it waits for this one)."""
        if self.policy == "timers_only":
            self._lock(self._timing, fcntl.LOCK_EX)
            start = time.time()
            try:
                yield self
            finally:
                self.windows.append((start, time.time()))
                self._unlock(self._timing)
            return
        self._unlock(self._gate)
        # exclusive: the host too, no beside_compiles worker's compile either
        with self._gate_alone(host_too=self.policy == "exclusive"):
            start = time.time()
            try:
                yield self
            finally:
                self.windows.append((start, time.time()))
        self.enter_shared()

    @contextmanager
    def _gate_alone(self, host_too: bool) -> Iterator[None]:
        """Hold the gate exclusively for the body, through the turnstile (so workers arriving meanwhile wait), and
        `compiling` too where `host_too`. The caller has dropped its own holds first."""
        self._lock(self._turnstile, fcntl.LOCK_EX)
        try:
            self._lock(self._gate, fcntl.LOCK_EX)
            try:
                if host_too:
                    self._lock(self._compiling, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    if host_too:
                        self._unlock(self._compiling)
            finally:
                self._unlock(self._gate)
        finally:
            self._unlock(self._turnstile)

    def summary(self) -> dict[str, object]:
        """For the record: seconds waited for the gate so far and the exclusive windows (epoch seconds)."""
        return {"gate": self.prefix, "gate_policy": self.policy, "gate_wait_s": self.waited_s,
                "timing_windows_epoch_s": [list(w) for w in self.windows]}


def host_work() -> ContextManager[bool]:
    """This worker's host-only work (see Gate.host_work); yields whether it ran outside the gate."""
    return _in_current_gate("host_work")


def device_work(alone: bool = False) -> ContextManager[bool]:
    """This worker's device work inside a host-work compile, or `alone` on the device (Gate.device_work); a
    no-op when ungated."""
    return _in_current_gate("device_work", alone=alone)


@contextmanager
def _in_current_gate(section: str, **how: bool) -> Iterator[bool]:
    """The current gate's `section` (host_work, device_work); yields False when the worker is not gated."""
    gate = current_gate()
    if gate is None:
        yield False
        return
    with getattr(gate, section)(**how) as inside:
        yield inside


def waited_so_far_s() -> float:
    """Seconds this worker has waited for its gate so far (0 when ungated): a step's own time is its span less
    the growth of this across it."""
    gate = current_gate()
    return gate.waited_s if gate is not None else 0.0


def note(event: str) -> None:
    """Append `event` to this worker's gate trace (Gate.note); a no-op when ungated or not tracing."""
    gate = current_gate()
    if gate is not None:
        gate.note(event)


def _share(change: Callable[[], None]) -> None:
    """Make a gate file or folder usable by other users when we own it; others' files are left alone."""
    try:
        change()
    except PermissionError:
        pass


def _open_shared(path: str) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    _share(lambda: os.fchmod(fd, 0o666))  # the umask would otherwise keep other users' workers out
    return fd


_current: Gate | None = None


def current_gate() -> Gate | None:
    """This worker process's gate, opened from the environment on first use; None when not gated."""
    global _current  # one gate per process: the device it was started on
    if _current is None and os.environ.get(ENV_PREFIX):
        _current = Gate(os.environ[ENV_PREFIX], os.environ.get(ENV_WAIT_FILE),
                        os.environ.get(ENV_POLICY) or "exclusive")
    return _current


@contextmanager
def timing_exclusive() -> Iterator[Gate | None]:
    """Hold this worker's device alone for the body (a no-op when the worker is not gated)."""
    gate = current_gate()
    if gate is None:
        yield None
        return
    with gate.exclusive():
        yield gate


def waited_s(wait_file: Path, now: float | None = None) -> float:
    """Seconds a worker has spent waiting for its gate, including a wait in progress; 0 if it never waited."""
    try:
        waited, since = (float(x) for x in wait_file.read_text().split())
    except (OSError, ValueError):
        return 0.0
    return waited + ((now or time.time()) - since if since > 0 else 0.0)
