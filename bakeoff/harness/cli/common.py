"""What every command shares: the consoles, the --db option, `fail` (exit 2 with a message) and `open_store`."""
from __future__ import annotations

import os
import sys
from typing import NoReturn

import typer
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape

from bakeoff.results.errors import StoreError

# Off a terminal (CI logs, pipes) rich would assume 80 columns: use 200 unless COLUMNS says otherwise.
console = Console(width=None if sys.stdout.isatty() or "COLUMNS" in os.environ else 200)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() or "COLUMNS" in os.environ else 200)

DB_OPTION = typer.Option(None, "--db", help="SQLAlchemy URL of the results store (default sqlite:///results/bakeoff.db)")


def print_fields(fields: list[str], sep: str = ", ", target: Console | None = None) -> None:
    """Print `fields` (plain text) joined by `sep` on as few lines as the console's width allows, breaking only
    between fields: a name with spaces in it ('Intel(R) Xeon(R) Processor', 'NVIDIA H200') stays on one line."""
    target = target or console
    lines: list[str] = []
    for field in fields:
        if lines and cell_len(lines[-1] + sep + field) <= target.width:
            lines[-1] += sep + field
        else:
            if lines:
                lines[-1] += sep.rstrip()
            lines.append(field)
    for line in lines:
        target.print(line, markup=False, highlight=False)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print `message` (plain text: brackets in it are shown, not read as markup) and exit with `code`."""
    err_console.print(f"[red]error[/]: {escape(message)}", highlight=False)
    raise typer.Exit(code)


def open_store(db: str | None, create: bool = False):
    """The results store at `db` (the default when None); a bad URL or unreachable server exits 2 naming it, and
    so does a SQLite file that does not exist unless `create` (the commands that write: run, calibrate), since
    opening one creates it: a command that only reads never leaves an empty store behind a mistyped --db."""
    from bakeoff.results.store import Store, require_store  # SQLAlchemy: loaded by the commands that open a store

    try:
        if not create:
            require_store(db)
        return Store(db)
    except StoreError as exc:
        fail(str(exc))
    except Exception as exc:  # a bad URL or unreachable server: say which
        fail(f"cannot open results store {db or 'results/bakeoff.db'}: {exc}")
