"""The Ray executor: each case is a Ray task asking for one GPU (or one CPU on a CPU cluster).

A task runs `execute_case` on whichever node Ray picks: the worker subprocess, its timeout and its crash
handling are the same as locally, pinned to the GPU Ray assigned (Ray sets CUDA_VISIBLE_DEVICES; the
worker gets "cuda:0") and sharing that node's timing gate for the device. The task returns the record
and the case's artifacts (as bytes); the driver receives results as they finish (`ray.wait`), stages the
artifacts locally, and alone writes the store. bakeoff must be installed at the same path on every node.
Ray is imported only here, and only when `--executor ray` is asked for.
"""
from __future__ import annotations

import functools
import os
import signal
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import psutil

from bakeoff.harness.measure.environment import environment
from bakeoff.harness.supervise.case_process import execute_case
from bakeoff.harness.run.executors.protocol import DeviceError, ExecutorError
from bakeoff.owner import ProcessId
from bakeoff.harness.supervise.leftovers import RAY_TMP_PREFIX, TMP_PREFIXES, clean_temporary, owned_prefix
from bakeoff.harness.plan.cases import Case
from bakeoff.harness.supervise.slots import Slot, gate_prefix
from bakeoff.harness.supervise.staging import discard, final_dir, pack, staging_dir, unpack

WAIT_POLL_S = 0.2  # how long one ray.wait blocks (seconds), so Ctrl-C is handled at once
LOCAL_OBJECT_STORE_BYTES = 256 * 2**20  # records and artifacts are small; spare the host's memory
TASK_RETRIES = 2  # Ray retries a task only when its node or Ray worker died, never for a failed case
CANCEL_WAIT_S = 10.0  # how long a stop waits for the killed Ray workers of cancelled tasks to end
REACH_TIMEOUT_S = 5.0  # how long --ray-address may take to accept a connection (ray.init itself retries for minutes)


def _node_slot(device: str) -> Slot:
    """This Ray worker's slot: the GPU Ray assigned it, or the node's CPU; labelled with the node's address."""
    import ray

    node = ray.util.get_node_ip_address()
    if device.startswith("cuda"):
        gpu = str(ray.get_gpu_ids()[0])
        return Slot(f"ray:{node}/gpu{gpu}", "cuda:0", (), gate_prefix(f"gpu-{gpu}"))
    return Slot(f"ray:{node}/cpu", None, (), gate_prefix("cpu"))


def node_environment_task(device: str) -> dict[str, Any]:
    """Runs inside a Ray worker: the environment of the node (and GPU) Ray placed it on."""
    import ray

    env = environment(_node_slot(device).device or device)
    return {**env, "ray_node": ray.util.get_node_ip_address()}


def run_case_task(case_json: str) -> dict[str, Any]:
    """Runs inside a Ray worker: the case in a node-local work folder; returns {"record", "artifacts"}.
    The record names the node's hardware and fingerprint: a cluster may mix machines."""
    case = Case.from_json(case_json)
    slot = _node_slot(case.device)
    _sweep_node()
    with tempfile.TemporaryDirectory(prefix=owned_prefix(RAY_TMP_PREFIX)) as tmp:
        record = execute_case(case, Path(tmp), slot=slot)
        try:
            files = pack(staging_dir(Path(tmp), case))
        except ValueError as exc:
            files, record["artifacts_error"] = {}, str(exc)
    record["node_hardware_id"], record["node_fingerprint"] = _node_identity(
        slot.device or case.device, os.environ.get("CUDA_VISIBLE_DEVICES"))
    return {"record": record, "artifacts": files}


@functools.lru_cache(maxsize=1)
def _sweep_node() -> None:
    """Once per Ray worker process: delete what killed bakeoff processes left in this node's temporary folder
    (harness/supervise/leftovers.py; a cancelled task's Ray worker is killed with its folders in place)."""
    clean_temporary()


@functools.lru_cache(maxsize=None)
def _node_identity(device: str, visible_gpus: str | None) -> tuple[str | None, str | None]:
    """(hardware id, fingerprint) of this node for `device` and the GPU(s) Ray made visible to this task:
    read once per Ray worker process (Ray reuses them for many tasks), not once per case."""
    env = environment(device)
    return env.get("hardware_id"), env.get("fingerprint")


def check_reachable(address: str) -> None:
    """Raise ConnectionError when nothing accepts a connection at `address` (HOST:PORT, or ray://HOST:PORT),
    at once, rather than letting ray.init retry for minutes; other forms ("auto") are left to Ray."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=REACH_TIMEOUT_S).close()
    except OSError as exc:
        raise ConnectionError(f"nothing accepts connections at {host}:{port} ({exc.strerror or exc}); is the "
                              "cluster's head running (`ray start --head`), and is that its address?") from None


def _wait_for_folder_owners(pids: set[int], timeout_s: float) -> None:
    """Wait (at most `timeout_s`) until every process among `pids` that owns a case, spare or Ray task folder
    in this machine's temporary folder has ended (harness/supervise/leftovers.py names the owners)."""
    owners = [owner for path in Path(tempfile.gettempdir()).iterdir()
              for prefix in TMP_PREFIXES
              if (owner := ProcessId.from_tag(path.name, prefix)) is not None and owner.pid in pids]
    deadline = time.monotonic() + timeout_s
    while any(owner.alive() for owner in owners) and time.monotonic() < deadline:
        time.sleep(0.05)


class RayExecutor:
    """Cases as Ray tasks. `jobs` caps the tasks in flight (None: the cluster's resources decide);
    `address` joins an existing cluster (None starts a local instance with `jobs` CPUs)."""

    def __init__(self, device: str, jobs: int | None, address: str | None) -> None:
        try:
            import ray
        except ImportError:
            raise ExecutorError("--executor ray needs Ray: pip install 'bakeoff[scale]'") from None
        self.device, self.jobs, self.address = device, jobs, address
        self._inflight: dict[Any, Case] = {}
        self._drained: list[tuple[Case, dict[str, Any]]] = []
        self._work_dir: Path | None = None
        self._owns_ray = False
        try:
            self._connect()
        except Exception as exc:  # a wrong address, a cluster that is down: before anything is written
            raise ExecutorError(f"cannot start or reach Ray ({address or 'local instance'}): "
                                f"{type(exc).__name__}: {exc}") from None
        if device.startswith("cuda") and not ray.cluster_resources().get("GPU"):
            self.close()  # tasks asking for a GPU would wait forever
            raise DeviceError(f"device {device} asked for, but the Ray cluster has no GPU")

    def _connect(self) -> None:
        import ray

        if ray.is_initialized():
            return
        on_sigterm = signal.getsignal(signal.SIGTERM)
        try:
            if self.address:
                check_reachable(self.address)
                ray.init(address=self.address, log_to_driver=False)
            else:
                ray.init(num_cpus=self.jobs or os.cpu_count(), include_dashboard=False, log_to_driver=False,
                         object_store_memory=LOCAL_OBJECT_STORE_BYTES)
        except SystemExit as exc:  # SIGTERM while a local instance starts: Ray's handler exits with its number
            if exc.code != signal.SIGTERM:
                raise
            raise KeyboardInterrupt from None
        self._owns_ray = True
        if on_sigterm is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, on_sigterm)  # Ray's own handler prints a stack and aborts the driver

    def run(self, cases: list[Case], work_dir: Path,
            on_start: Callable[[Case], None] | None = None) -> Iterator[tuple[Case, dict[str, Any]]]:
        import ray
        from ray.exceptions import RayError

        self._work_dir = work_dir
        gpu = self.device.startswith("cuda")
        task = ray.remote(run_case_task).options(num_gpus=1 if gpu else 0, num_cpus=1, max_retries=TASK_RETRIES)
        waiting = list(reversed(cases))
        cap = self.jobs or len(cases)
        while waiting or self._inflight:
            while waiting and len(self._inflight) < cap:
                case = waiting.pop()
                self._inflight[task.remote(case.to_json())] = case
                if on_start:
                    on_start(case)
            done, _ = ray.wait(list(self._inflight), num_returns=1, timeout=WAIT_POLL_S)
            for ref in done:
                case = self._inflight.pop(ref)
                try:
                    record = self._result(ref, case, work_dir)
                except RayError as exc:  # its node or Ray worker died after every retry
                    record = {"status": "crash", "reason": f"ray task failed: {type(exc).__name__}: {exc}"[:2000]}
                yield case, record

    def _result(self, ref: Any, case: Case, work_dir: Path) -> dict[str, Any]:
        """The record of a finished task, its artifacts staged under `work_dir`; raises RayError if the task
        itself failed. Artifacts that cannot be unpacked (a path leaving the case's folder) are dropped and
        the reason kept in the record's `artifacts_error`: the record itself is still good."""
        import ray

        out = ray.get(ref)
        record = out["record"]
        discard(work_dir, case)
        record.pop("artifacts_dir", None)  # it named a folder on the node
        if out["artifacts"]:
            try:
                unpack(out["artifacts"], staging_dir(work_dir, case))
            except ValueError as exc:
                discard(work_dir, case)  # whatever was unpacked before the bad path
                record["artifacts_error"] = str(exc)[:2000]
            else:
                record["artifacts_dir"] = str(final_dir(work_dir, case))
        return record

    def stop(self) -> None:
        """Keep the results of tasks that already ended; cancel the rest (killing their Ray workers, and
        with them the bakeoff workers they started)."""
        import ray
        from ray.exceptions import RayError

        if not self._inflight:
            return
        refs = list(self._inflight)
        ended, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        cancelled = [ref for ref in refs if ref not in ended]
        local_workers = {p.pid for p in psutil.Process().children(recursive=True)}  # a local instance's
        for ref in cancelled:
            ray.cancel(ref, force=True)
        if cancelled:  # a killed task leaves its folders: delete those on this machine once it has died
            _wait_for_folder_owners(local_workers, CANCEL_WAIT_S)
            clean_temporary()
        for ref in ended:
            case = self._inflight.pop(ref)
            if self._work_dir is None:
                continue
            try:
                self._drained.append((case, self._result(ref, case, self._work_dir)))
            except RayError:
                pass  # a task that failed (or was cancelled) is left for --resume, not recorded
        self._inflight.clear()

    def drain(self) -> list[tuple[Case, dict[str, Any]]]:
        out, self._drained = self._drained, []
        return out

    def environment(self, device: str) -> dict[str, Any]:
        """The environment of a node of the cluster, from a task that asks for what a case asks for (one
        GPU, or one CPU): the driver may have no GPU at all. Records also carry their own node's
        `node_hardware_id` and `node_fingerprint`."""
        import ray

        gpu = device.startswith("cuda")
        task = ray.remote(node_environment_task).options(num_gpus=1 if gpu else 0, num_cpus=1)
        return ray.get(task.remote(device))

    def resume_options(self) -> str:
        return (" --executor ray" + (f" --ray-address {self.address}" if self.address else "")
                + (f" --jobs {self.jobs}" if self.jobs else ""))

    def close(self) -> None:
        import ray

        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
