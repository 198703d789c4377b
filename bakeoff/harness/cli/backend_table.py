"""What `bakeoff list backends` and `doctor` say about each backend: origin, version, status, options.

Every backend is loaded here, plugins included; one that fails (to import, to be a Backend, to answer
`available()` or `version()`) is a row saying why, never an exception out of the command. Text from
backends and plugins is escaped: brackets in it are shown, not read as rich markup.
"""
from __future__ import annotations

from dataclasses import dataclass

from rich.markup import escape
from rich.table import Table

from bakeoff.backends import backend_class, names, origin, plugins
from bakeoff.backends.options import option_rows


@dataclass(frozen=True)
class BackendRow:
    name: str
    origin: str          # "built-in" or "DIST VERSION"
    version: str | None
    status: str          # "available", or why not
    usable: bool         # loads and is available here
    options: type | None = None  # the Options model, when the backend loads
    grad: bool | None = None     # computes training steps (`grad: true`); None when it does not load
    warning: str | None = None   # an installation problem that does not stop it (Backend.install_warning)


def backend_rows() -> list[BackendRow]:
    """One row per backend a config may name, then one per plugin that is not used (with its problem)."""
    rows = []
    for name in names():
        try:
            cls = backend_class(name)
        except Exception as exc:  # BackendLoadError: a plugin (or a broken install) that does not load
            rows.append(BackendRow(name, origin(name), None, str(exc), False))
            continue
        try:
            reason, version, warning = cls.available(), cls.version(), cls.install_warning()
        except Exception as exc:
            reason, version, warning = f"available()/version() raised {type(exc).__name__}: {str(exc)[:200]}", None, None
        rows.append(BackendRow(name, origin(name), version, "available" if reason is None else reason,
                               reason is None, cls.Options, bool(getattr(cls, "grad", False)), warning))
    for p in plugins():
        if p.problem:
            rows.append(BackendRow(p.name, p.dist, None, f"plugin not used: {p.problem}", False))
    return rows


def backends_table() -> Table:
    t = Table("backend", "origin", "version", "fwd+bwd", "status")
    for row in backend_rows():
        status = escape(row.status)
        t.add_row(escape(row.name), escape(row.origin), escape(row.version or "-"),
                  {True: "yes", False: "no", None: "-"}[row.grad],
                  f"[green]{status}[/]" if row.usable else f"[yellow]{status}[/]")
    return t


def options_table() -> Table:
    """Each loadable backend's options: name, type, default, description (a row '-' for none)."""
    t = Table("backend", "option", "type", "default", "description", title="backend options (YAML "
              "`backends: {LABEL: {backend: NAME, OPTION: VALUE}}`)")
    rows = [r for r in backend_rows() if r.options is not None]
    for i, row in enumerate(rows):
        fields = option_rows(row.options) or [("-", "", "", "takes no options")]
        for j, (option, kind, default, description) in enumerate(fields):
            t.add_row(escape(row.name) if j == 0 else "", escape(option), escape(kind), escape(default),
                      escape(description), end_section=j == len(fields) - 1 and i < len(rows) - 1)
    return t
