"""`bakeoff run --run-id-file FILE`: the run's id written to FILE as soon as the run is in the store, for the
steps of a CI job that come after it (compare, report) to name that run rather than "latest", which in a shared
store may be somebody else's newer run."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from bakeoff.harness.cli.common import err_console, fail


def run_id_writer(path: Path) -> Callable[[str], None]:
    """Check that `path` can be written (else exit 2, before anything is run or stored) and remove a file an
    earlier run left there, so that FILE never names an older run when this one records nothing; returns the
    function that writes the id (whole, through a temporary file and a rename: a reader sees the id or no file)."""
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        fail(f"--run-id-file {path}: folder {parent} does not exist")
    if path.is_dir() or not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        fail(f"--run-id-file {path}: cannot write there")
    path.unlink(missing_ok=True)

    def write(run_id: str) -> None:
        tmp = path.with_name(path.name + ".tmp")
        try:
            tmp.write_text(run_id + "\n")
            tmp.replace(path)
        except OSError as exc:  # the run goes on: its id is printed too
            err_console.print(f"warning: --run-id-file {path}: cannot write: {exc.strerror}", markup=False,
                              highlight=False)

    return write
