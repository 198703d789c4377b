"""Backends from outside the repository: a small plugin distribution is built and pip-installed (offline, into
a temporary target) and run through the real CLI; broken plugins (an import error, a class that is not a
Backend, a name a built-in has) are reported by `list backends` and `doctor`, never a crash."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import bakeoff

ADAPTER = '''
from pydantic import Field

from bakeoff.backends.base import Backend, CompileInfo, TorchCompiled
from bakeoff.backends.options import BackendOptions


class DemoOptions(BackendOptions):
    scale: float = Field(1.0, gt=0, le=10, description="outputs are multiplied by this [1.0: exact]")


class DemoBackend(Backend):
    """The graph's PyTorch lowering, its outputs scaled: a plugin whose numbers the harness must judge."""

    name = "demo"
    devices = frozenset({"cpu"})
    Options = DemoOptions

    @classmethod
    def version(cls):
        return "demo-compiler 0.1"

    def compile(self, graph, specs, device, options):
        from bakeoff.workloads.lower_torch import lower_torch

        opts = self.parse_options(options)
        fn = lower_torch(graph)

        def run(*xs):
            return tuple(o * opts.scale for o in fn(*xs))

        return TorchCompiled(run, device, CompileInfo(notes=[f"demo scale={opts.scale}"]))
'''

BROKEN = '''
from bakeoff.backends.eager import EagerBackend


class NotABackend:
    name = "notabackend"


class Shadow(EagerBackend):
    name = "eager"
'''


def _write_dist(root: Path, dist: str, package: str, files: dict[str, str], entry_points: dict[str, str]) -> Path:
    src = root / dist
    (src / package).mkdir(parents=True)
    (src / package / "__init__.py").write_text("")
    for name, text in files.items():
        (src / package / name).write_text(textwrap.dedent(text))
    eps = "\n".join(f'"{k}" = "{v}"' for k, v in entry_points.items())
    (src / "pyproject.toml").write_text(textwrap.dedent(f"""\
        [build-system]
        requires = ["setuptools>=64"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "{dist}"
        version = "0.1"

        [project.entry-points."bakeoff.backends"]
        """) + eps + f'\n\n[tool.setuptools]\npackages = ["{package}"]\n')
    return src


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    """A folder holding two installed distributions: a working plugin (`demo`) and a broken one."""
    root = tmp_path_factory.mktemp("plugins")
    site = root / "site"
    good = _write_dist(root, "bakeoff-demo-plugin", "demo_bakeoff", {"adapter.py": ADAPTER},
                       {"demo": "demo_bakeoff.adapter:DemoBackend"})
    broken = _write_dist(root, "bakeoff-broken-plugin", "demo_broken", {"bad.py": BROKEN},
                         {"brokenimport": "demo_broken.missing:Nope", "notabackend": "demo_broken.bad:NotABackend",
                          "eager": "demo_broken.bad:Shadow"})
    for src in (good, broken):
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                        "--no-index", "--target", str(site), str(src)], check=True, capture_output=True, text=True,
                       timeout=600)
    assert (site / "demo_bakeoff" / "adapter.py").exists()
    return site


@pytest.fixture
def with_plugins(plugin_site, monkeypatch) -> Path:
    """The `bakeoff` commands of this test (and their workers) see the installed plugins."""
    paths = [str(plugin_site)] + [p for p in [os.environ.get("PYTHONPATH")] if p]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    return plugin_site


def test_list_backends_shows_plugins_with_their_origin_and_problems(tmp_path, with_plugins):
    proc = bakeoff("list", "backends", "--options", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    backends, options = proc.stdout.split("backend options")
    rows: dict[str, str] = {}   # the first table's row of each backend (a wrapped row's lines joined)
    name = ""
    for line in backends.splitlines():
        if line.count("│") >= 4:
            name = line.split("│")[1].strip() or name
            rows[name] = rows.get(name, "") + line
    assert "built-in" in rows["eager"] and "built-in" in rows["inductor"]
    assert "bakeoff-demo-plugin 0.1" in rows["demo"] and "demo-compiler 0.1" in rows["demo"]
    assert "available" in rows["demo"]
    assert "ModuleNotFoundError" in rows["brokenimport"] and "bakeoff-broken-plugin 0.1" in rows["brokenimport"]
    out = " ".join(proc.stdout.split())   # rows wrap in the table: compare the words
    assert "is not a subclass of bakeoff.backends.base.Backend" in out
    assert "plugin not used: its name 'eager' is a built-in backend's" in out
    # The plugin's options, from its model; brackets in its text are shown, not taken for markup.
    assert "outputs are multiplied by this [1.0: exact]" in " ".join(options.split())
    assert "float, 0 < x <= 10" in options and "1.0" in options


def test_doctor_reports_broken_plugins_and_exits_0(tmp_path, with_plugins):
    proc = bakeoff("doctor", "--device", "cpu", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    assert "demo (bakeoff-demo-plugin 0.1): available demo-compiler 0.1" in out
    assert "brokenimport (bakeoff-broken-plugin 0.1)" in out and "failed to load" in out
    assert "notabackend" in out and "eager (bakeoff-broken-plugin 0.1): plugin not used" in out


CONFIG = """
name: plugin
device: cpu
preset: smoke
dtypes: [float32]
workloads: [ew_sigmoid_relu]
backends:
  eager: {}
  demo: {}
  demo-scaled: {backend: demo, scale: 2.0}
seeds: [0, 1]
timing: {warmup_s: 0.01, budget_s: 0.05, min_reps: 3}
compile: {warm: false}
timeout_s: 300
"""


def test_a_case_runs_through_a_plugin_backend(tmp_path, with_plugins):
    (tmp_path / "c.yaml").write_text(CONFIG)
    db = f"sqlite:///{tmp_path / 's.db'}"
    bakeoff("run", "c.yaml", "--db", db, cwd=tmp_path, check=True)
    records = {r["backend"]: r for r in json.loads(bakeoff("export", "latest", "--db", db, cwd=tmp_path,
                                                           check=True).stdout)}
    assert records["eager"]["status"] == "ok" and records["demo"]["status"] == "ok"
    assert records["demo"]["latency_ms_median"] > 0 and records["demo"]["options"] == {}
    # The plugin's own option reached its compile(): scaled outputs are wrong, and judged so.
    assert records["demo-scaled"]["status"] == "mismatch"
    assert records["demo-scaled"]["options"] == {"scale": 2.0}


@pytest.mark.parametrize("backends,line,needle", [
    ("  demo: {scael: 2.0}\n", 9, "backends.demo.scael: unknown key 'scael': demo has no such option"),
    ("  demo: {scale: 50}\n", 9, "backends.demo.scale: Input should be less than or equal to 10"),
    ("  x: {backend: brokenimport}\n", 9, "failed to load: ModuleNotFoundError"),
    ("  notabackend: {}\n", 9, "is not a subclass of bakeoff.backends.base.Backend"),
])
def test_plugin_config_errors_exit_2(tmp_path, with_plugins, backends, line, needle):
    text = CONFIG.split("backends:\n")[0] + "backends:\n  eager: {}\n" + backends + "seeds: [0, 1]\n"
    (tmp_path / "c.yaml").write_text(text)
    proc = bakeoff("run", "c.yaml", "--db", f"sqlite:///{tmp_path / 's.db'}", cwd=tmp_path, timeout=300)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert f"c.yaml:{line}:" in proc.stderr and needle in " ".join(proc.stderr.split()), proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]


def _environment(cwd: Path) -> dict:
    code = "import json; from bakeoff.harness.measure.environment import environment; print(json.dumps(environment('cpu')))"
    return json.loads(subprocess.run([sys.executable, "-c", code], cwd=cwd, check=True, capture_output=True,
                                     text=True, timeout=120).stdout)


def test_the_run_environment_names_each_plugin_and_its_version(tmp_path, with_plugins, monkeypatch):
    """A plugin's records are only comparable with records of the same plugin release: its distribution and
    version are in the environment's versions, so upgrading it changes the fingerprint (compare, resume and the
    report then name the change) as upgrading torch does."""
    with_env = _environment(tmp_path)
    assert with_env["versions"]["plugin:demo"] == "bakeoff-demo-plugin 0.1"
    assert with_env["versions"]["torch"]   # the packages are still there
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in os.environ["PYTHONPATH"].split(os.pathsep)
                                                     if p != str(with_plugins)))
    without = _environment(tmp_path)
    assert not any(k.startswith("plugin:") for k in without["versions"])
    assert without["fingerprint"] != with_env["fingerprint"]
