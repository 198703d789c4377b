"""What every command shares: the consoles, the --db option, `fail` (exit 2 with a message) and `open_store`."""
from __future__ import annotations

import os
import sys

import typer
from rich.console import Console
from rich.markup import escape

# Off a terminal (CI logs, pipes) rich would assume 80 columns: use 200 unless COLUMNS says otherwise.
console = Console(width=None if sys.stdout.isatty() or "COLUMNS" in os.environ else 200)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() or "COLUMNS" in os.environ else 200)

DB_OPTION = typer.Option(None, "--db", help="SQLAlchemy URL of the results store (default sqlite:///results/bakeoff.db)")


def fail(message: str, code: int = 2) -> None:
    """Print `message` (plain text: brackets in it are shown, not read as markup) and exit with `code`."""
    err_console.print(f"[red]error[/]: {escape(message)}", highlight=False)
    raise typer.Exit(code)


def open_store(db: str | None):
    from bakeoff.results.store import Store, StoreError

    try:
        return Store(db)
    except StoreError as exc:
        fail(str(exc))
    except Exception as exc:  # a bad URL or unreachable server: say which
        fail(f"cannot open results store {db or 'results/bakeoff.db'}: {exc}")
