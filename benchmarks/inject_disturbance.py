"""Inject disturbances into a small bakeoff run and check that the noise rules (harness/measure/noise.py) mark
exactly what they should.

    python benchmarks/inject_disturbance.py --out DIR [--total-s 390] [--jobs 8] [--gate GATE]
        [--workloads rmsnorm gemm_bias_gelu attention] [--backends eager inductor tritongen xla]
        [--dtypes bfloat16] [--phases quiet outsider burners]
    python benchmarks/inject_disturbance.py --dry-run --out DIR   # CPU, `smoke` sizes: the plumbing only
    python benchmarks/inject_disturbance.py --tables DIR          # the tables and verdicts of a finished DIR

The same narrowed config (configs/h200.yaml: these workloads, backends and dtypes, warm compile off) runs
once per phase, each into its own store under DIR:
- quiet: nothing else runs;
- outsider: a process that is no bakeoff worker (no BAKEOFF_* in its environment, so NVML's other-process check
  cannot take it for a gated sibling) runs a torch GEMM loop on the same GPU from before the run starts until
  it ends;
- burners: one busy process per CPU core beside the run.
Each phase gets an equal share of what --total-s leaves (what a phase leaves over goes to the next); a run cut
short gets SIGINT and keeps the cases it finished.

Then, per phase and backend: ok cases, `headline ~` (headline_quality noisy), `speedup ~` (speedup_quality noisy,
of the cases with a paired speedup), `host ~` (host_quality noisy: the host-clock figures, judged by host load),
`overlap` (cases whose timing windows met the disturbance's window), `dev-timed` (headlines from the CUPTI span),
`NVML saw` (cases where NVML saw a process on the GPU that is no gated worker of the run), `NVML err` (NVML could
not tell), `not ok` (cases that did not end ok), and the reasons that fired, by kind. The verdicts:
- quiet: at most 5% of the ok cases have a noisy headline or speedup;
- outsider: every case whose timing window overlapped the outsider has a noisy headline and, where it has one,
  a noisy speedup;
- burners: every overlapping case has noisy host-clock figures; its headline is not noisy where it is
  device-timed (the CUPTI span: clean, or `clock`, a spread the calls' own SM clocks account for) and noisy where
  it is host-timed.
DIR gets config.yaml, one store and run log per phase (PHASE.db, PHASE.log), phases.json (stores, run ids and
disturbance windows) and inject_disturbance.json (the tables and verdicts, benchmarks/inject_verdicts.py).

Without CUDA it measures nothing and exits 0, unless --dry-run: then on the CPU at `smoke` sizes (configs/
smoke.yaml), with a CPU matmul loop as the outsider. A CPU run cannot show the GPU rule (its outsider is host
load, and no headline is device-timed); it shows that the phases, stores, tables and verdicts work.
Exit status: 0 when every verdict holds (or nothing was measured), 1 when one fails, 2 when a phase could not
run (a config the harness refuses, an outsider that did not start) or on a usage error.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from bakeoff.results.store import Store  # noqa: E402
from benchmarks.inject_verdicts import (Phase, load_phases, read_records, render, report,  # noqa: E402
                                        save_phases)

PHASES = ("quiet", "outsider", "burners")
GPU_DEFAULTS = {"config": "configs/h200.yaml", "workloads": ["rmsnorm", "gemm_bias_gelu", "attention"],
                "backends": ["eager", "inductor", "tritongen", "xla"], "dtypes": ["bfloat16"]}
DRY_DEFAULTS = {"config": "configs/smoke.yaml", "workloads": ["rmsnorm"], "backends": ["eager", "xla"],
                "dtypes": ["float32"]}
READY_WAIT_S = 120.0  # the outsider's torch import, CUDA context and first GEMM
STOP_GRACE_S = 15.0  # after SIGINT, for the run to store what it finished


class CannotRun(RuntimeError):
    """A phase could not run: a config the harness refuses, an outsider that did not start."""


# --- the disturbances ---------------------------------------------------------------------------------------

def outsider_env() -> dict[str, str]:
    """This environment without any BAKEOFF_* variable: a process no gate check can take for a bakeoff worker."""
    return {k: v for k, v in os.environ.items() if not k.startswith("BAKEOFF_")}


def outsider_loop(device: str, ready: Path, n: int) -> None:
    """Matmuls of n x n until SIGTERM (bf16 on a GPU, fp32 on one CPU thread); `ready` gets the epoch second
    the loop started, after the first product finished."""
    import torch

    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    cuda = device.startswith("cuda")
    if not cuda:
        torch.set_num_threads(1)
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16 if cuda else torch.float32)
    b = torch.randn_like(a)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    a @ b
    sync()
    tmp = ready.with_suffix(".tmp")
    tmp.write_text(repr(time.time()))
    tmp.rename(ready)
    while not stop:
        for _ in range(8):
            a @ b
        sync()


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


@contextlib.contextmanager
def outsider(device: str, out: Path, n: int) -> Iterator[dict[str, float]]:
    """A GEMM-loop process on `device` from the moment it yields until the block ends; the dict gets the loop's
    `start` and, at the end, `end` (epoch seconds)."""
    ready = out / "outsider_process.ready"
    ready.unlink(missing_ok=True)
    with open(out / "outsider_process.log", "w") as log:
        proc = subprocess.Popen([sys.executable, __file__, "--outsider", device, "--ready", str(ready),
                                 "--outsider-n", str(n)], env=outsider_env(), stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + READY_WAIT_S
    while not ready.exists():
        if proc.poll() is not None or time.time() > deadline:
            _stop([proc])
            tail = (out / "outsider_process.log").read_text()[-2000:]
            raise CannotRun(f"the outsider did not start its GEMM loop (exit {proc.returncode}):\n{tail}")
        time.sleep(0.2)
    window = {"start": float(ready.read_text())}
    print(f"outsider pid {proc.pid}: {n}x{n} matmuls on {device}", flush=True)
    try:
        yield window
    finally:
        window["end"] = time.time()
        _stop([proc])


@contextlib.contextmanager
def burners(count: int) -> Iterator[dict[str, float]]:
    """`count` processes that spin on a CPU each, from the moment it yields until the block ends."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], env=outsider_env())
             for _ in range(count)]
    window = {"start": time.time()}
    print(f"{count} CPU burners", flush=True)
    try:
        yield window
    finally:
        window["end"] = time.time()
        _stop(procs)


# --- the runs -----------------------------------------------------------------------------------------------

def write_config(src: Path, dst: Path, workloads: list[str], backends: list[str], dtypes: list[str]) -> None:
    """`src` narrowed to these workloads, backends and dtypes, warm compile off (no cache check to wait for)."""
    cfg = yaml.safe_load(src.read_text())
    listed = cfg["backends"] if isinstance(cfg["backends"], dict) else {b: {} for b in cfg["backends"]}
    missing = [w for w in workloads if w not in cfg["workloads"]] + [b for b in backends if b not in listed]
    if missing:
        raise CannotRun(f"{src}: not in the config: {', '.join(missing)}")
    cfg.update(name=f"inject_{cfg.get('name', 'config')}", workloads=workloads, dtypes=dtypes,
               backends={b: listed[b] for b in backends}, compile={**(cfg.get("compile") or {}), "warm": False})
    dst.write_text(yaml.safe_dump(cfg, sort_keys=False))


def _interrupt(proc: subprocess.Popen) -> None:
    """SIGINT (a bakeoff run then stores what it finished and stops), SIGKILL after STOP_GRACE_S."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_bakeoff(config: Path, phase: Phase, out: Path, work: Path, jobs: int, gate: str | None,
                limit_s: float) -> None:
    """`bakeoff run` into the phase's store (its log in `out`, its artifacts under `work`), cut by SIGINT after
    `limit_s` (it keeps what it finished)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    cmd = [sys.executable, "-m", "bakeoff", "run", str(config), "--db", phase.store, "--jobs", str(jobs)]
    cmd += ["--gate", gate] if gate else []
    work = work / phase.name
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    with open(out / f"{phase.name}.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            proc.wait(max(limit_s, 1.0))
        except subprocess.TimeoutExpired:
            print(f"{phase.name}: cut after {limit_s:.0f} s (SIGINT)", flush=True)
            _interrupt(proc)
        except BaseException:  # SIGTERM (main) or Ctrl-C: the run keeps what it finished, then we stop
            _interrupt(proc)
            raise
        finally:
            phase.exit_code, phase.elapsed_s = proc.returncode, time.time() - t0
            phase.run_id = Store(phase.store).latest_run_id() if (out / f"{phase.name}.db").exists() else None
    tail = [ln for ln in (out / f"{phase.name}.log").read_text().splitlines() if ln.strip()][-3:]
    if phase.run_id is None:
        raise CannotRun(f"{phase.name}: bakeoff run stored no run (exit {phase.exit_code}):\n" + "\n".join(tail))
    print(f"{phase.name}: bakeoff run exited {phase.exit_code} after {phase.elapsed_s:.0f} s; "
          + " | ".join(tail), flush=True)


def run_phases(args: argparse.Namespace, device: str, out: Path, work: Path, config: Path) -> list[Phase]:
    """Each phase's run under its disturbance, in order; phases.json after each (and when stopped midway)."""
    t_end = time.time() + args.total_s
    done: list[Phase] = []
    try:
        for i, name in enumerate(args.phases):
            phase = Phase(name, f"sqlite:///{(out / f'{name}.db').resolve()}")
            done.append(phase)
            with _disturbance(name, args, device, out) as window:
                limit = (t_end - time.time()) / (len(args.phases) - i)
                print(f"== {name}: the run gets {limit:.0f} s", flush=True)
                try:
                    run_bakeoff(config, phase, out, work, args.jobs, args.gate, limit)
                finally:
                    phase.window = (window["start"], time.time()) if window else None
            phase.window = (window["start"], window["end"]) if window else None
    finally:
        save_phases(done, out)
    return done


def _disturbance(name: str, args: argparse.Namespace, device: str,
                 out: Path) -> contextlib.AbstractContextManager[dict[str, float]]:
    if name == "outsider":
        return outsider(device, out, args.outsider_n)
    if name == "burners":
        return burners(args.burners or len(os.sched_getaffinity(0)))
    return contextlib.nullcontext({})


# --- the command ----------------------------------------------------------------------------------------------

def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="folder for the config, stores, logs and JSON")
    ap.add_argument("--tables", type=Path, metavar="DIR", help="print the tables and verdicts of a finished DIR")
    ap.add_argument("--dry-run", action="store_true", help="on the CPU at smoke sizes (the plumbing, not the rule)")
    ap.add_argument("--total-s", type=float, default=390.0, help="seconds for all phases' runs together")
    ap.add_argument("--phases", nargs="+", default=list(PHASES), choices=PHASES)
    ap.add_argument("--config", type=Path, help="the config to narrow (default configs/h200.yaml; "
                    "configs/smoke.yaml for --dry-run)")
    ap.add_argument("--workloads", nargs="+")
    ap.add_argument("--backends", nargs="+")
    ap.add_argument("--dtypes", nargs="+")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--work", type=Path, help="where the runs keep their artifacts (default: a temporary folder, "
                    "removed at the end)")
    ap.add_argument("--gate", help="bakeoff run --gate (default: the config's)")
    ap.add_argument("--burners", type=int, help="busy processes in the burners phase (default: one per CPU)")
    ap.add_argument("--outsider-n", type=int, help="the outsider's matrix size (8192 on a GPU, 256 on the CPU)")
    ap.add_argument("--outsider", metavar="DEVICE", help=argparse.SUPPRESS)  # the outsider process itself
    ap.add_argument("--ready", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if not (args.outsider or args.tables or args.out):
        ap.error("--out DIR (or --tables DIR) is required")
    return args


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    if args.outsider:
        outsider_loop(args.outsider, args.ready, args.outsider_n or 256)
        return 0
    if args.tables:
        saved = args.tables / "inject_disturbance.json"
        rep = report(load_phases(args.tables), json.loads(saved.read_text())["dry_run"] if saved.exists() else False)
        print(render(rep))
        return 1 if any(v["ok"] is False for v in rep["verdicts"]) else 0
    if not args.dry_run and not _cuda():
        print("no CUDA device: nothing measured (--dry-run runs the phases on the CPU at smoke sizes)")
        return 0
    defaults = DRY_DEFAULTS if args.dry_run else GPU_DEFAULTS
    args.outsider_n = args.outsider_n or (256 if args.dry_run else 8192)
    args.out = args.out.resolve()  # the runs work in other folders
    args.work = args.work.resolve() if args.work else None
    # `timeout` stops us with SIGTERM: unwind, so the run, the outsider and the burners stop with us
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args.out.mkdir(parents=True, exist_ok=True)
    config = args.out / "config.yaml"
    try:
        write_config(args.config or REPO / defaults["config"], config, args.workloads or defaults["workloads"],
                     args.backends or defaults["backends"], args.dtypes or defaults["dtypes"])
        with contextlib.ExitStack() as stack:
            work = args.work or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="inject-disturbance-")))
            phases = run_phases(args, "cpu" if args.dry_run else "cuda:0", args.out, work, config)
    except CannotRun as exc:
        print(f"inject_disturbance: {exc}", file=sys.stderr)
        return 2
    for p in phases:
        p.records = read_records(p.store, p.run_id)
    rep = report(phases, args.dry_run)
    (args.out / "inject_disturbance.json").write_text(json.dumps(rep, indent=1))
    print(render(rep))
    return 1 if any(v["ok"] is False for v in rep["verdicts"]) else 0


if __name__ == "__main__":
    sys.exit(main())
