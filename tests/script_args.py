"""Arguments held against a benchmarks/ script's own argparse parser, without running the script's work.

`check_scripts({script: [argv, ...]})` runs, in one child process, each script as `__main__` up to its
`parse_args` (or `parse_known_args`) call, takes the parser it built there and parses each argv with it: an
unknown option, a missing value or a value of the wrong type or outside its choices is argparse's error message.
A child process, because the scripts set environment variables and `sys.path` as they load."""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import runpy
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


class _Stop(BaseException):
    """Raised in place of the script's parse call: the script stops there."""


def _parser_of(script: Path) -> tuple[argparse.ArgumentParser, bool] | None:
    """The parser `script` builds before it parses its arguments, and whether it parses them with
    `parse_known_args` (leftovers allowed, as the script allows them); None for a script that does not use
    argparse (it is not run: it would do its work)."""
    if "argparse" not in script.read_text():
        return None
    found: dict = {}
    plain, known = argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args

    def stop(parser: argparse.ArgumentParser, lenient: bool):
        found.setdefault("parser", (parser, lenient))
        raise _Stop

    argparse.ArgumentParser.parse_args = lambda self, *a, **k: stop(self, False)  # type: ignore[method-assign]
    argparse.ArgumentParser.parse_known_args = lambda self, *a, **k: stop(self, True)  # type: ignore[method-assign]
    argv = sys.argv
    sys.argv = [str(script)]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            runpy.run_path(str(script), run_name="__main__")
    except _Stop:
        pass
    finally:
        argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args = plain, known
        sys.argv = argv
    if "parser" not in found:
        raise RuntimeError(f"{script.name} does not parse its arguments with argparse")
    return found["parser"]


def _parse(parser: argparse.ArgumentParser, lenient: bool, argv: list[str]) -> str | None:
    """None when `argv` parses, else argparse's message."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            (parser.parse_known_args if lenient else parser.parse_args)(argv)
    except SystemExit as exc:
        return err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else f"exit {exc.code}"
    return None


def _child(requests: dict[str, list[list[str]]]) -> dict[str, dict]:
    out = {}
    for name, argvs in requests.items():
        try:
            found = _parser_of(REPO / "benchmarks" / name)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 (reported to the test, which fails on it)
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        if found is None:
            out[name] = {"argparse": False}
            continue
        parser, lenient = found
        options = sorted(s for action in parser._actions for s in action.option_strings)
        out[name] = {"options": options, "errors": [_parse(parser, lenient, argv) for argv in argvs]}
    return out


def check_scripts(requests: dict[str, list[list[str]]]) -> dict[str, dict]:
    """Per script name (in benchmarks/): its option strings (`options`) and, per argv of `requests[name]`, None
    or argparse's error message (`errors`); `argparse: False` for a script that reads `sys.argv` itself; or
    `error` when running it up to its parser failed."""
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")]),
               "CUDA_VISIBLE_DEVICES": "", "TMPDIR": tmp}
        proc = subprocess.run([sys.executable, __file__, str(result)], input=json.dumps(requests), text=True,
                              capture_output=True, cwd=REPO, env=env, timeout=600)
        if proc.returncode != 0:
            raise AssertionError(f"script_args child failed:\n{proc.stderr[-3000:]}")
        return json.loads(result.read_text())


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(json.dumps(_child(json.load(sys.stdin))))
