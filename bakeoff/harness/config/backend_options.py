"""The `backends:` section checked at load time: each label names a backend that loads here, and its options
are valid for that backend's `Options` model. Errors name the line of the label or of the bad option."""
from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from bakeoff.backends import BackendLoadError, UnknownBackend, backend_class, names
from bakeoff.harness.config.errors import pydantic_error, shown
from bakeoff.harness.config.yaml_lines import LocatedYaml

# The option that picks the backend of a label; every other key goes to the backend's Options.
BACKEND_KEY = "backend"
# The baseline's label: records, summaries and reports take the cases labelled so for eager's own.
BASELINE = "eager"


def _raw_list_duplicates(where: LocatedYaml) -> None:
    """`backends: [eager, eager]`: the short form names each backend once."""
    raw = where.data.get("backends") if isinstance(where.data, dict) else None
    if not isinstance(raw, list):
        return
    for j, name in enumerate(raw):
        if name in raw[:j]:
            raise where.error(("backends", j), f"backend {shown(name)} is listed twice (first as item "
                                               f"{raw.index(name)})")


def _raw_options(where: LocatedYaml, label: str) -> Any:
    raw = where.data.get("backends") if isinstance(where.data, dict) else None
    return raw.get(label) if isinstance(raw, dict) else None


def check_backends(backends: dict[str, dict[str, Any]], where: LocatedYaml) -> None:
    """Keys of `backends` are labels: a backend's name, or any label with `backend: NAME` among its options
    (so one backend can run under several option sets, e.g. inductor default and max-autotune). Each
    label's other options are validated against its backend's Options model. The label `eager` is the
    baseline's: it names the eager backend only."""
    _raw_list_duplicates(where)
    for label, opts in backends.items():
        adapter = opts.get(BACKEND_KEY, label)
        path = ("backends", label) + ((BACKEND_KEY,) if BACKEND_KEY in opts else ())
        if not isinstance(adapter, str):
            raise where.error(path, f"`backend` must be a backend's name, got {shown(adapter)}")
        if label == BASELINE and adapter != BASELINE:
            raise where.error(path, f"the label {BASELINE!r} is reserved for the eager baseline; give backend "
                                    f"{shown(adapter)} another label")
        try:
            cls = backend_class(adapter)
        except UnknownBackend:
            hint = "" if adapter != label else " (or give `backend: NAME` for a label)"
            raise where.error(path, f"unknown backend {shown(adapter)}; known: {', '.join(names())}{hint}") from None
        except BackendLoadError as exc:
            raise where.error(path, str(exc)) from None
        given = {k: v for k, v in opts.items() if k != BACKEND_KEY}
        try:
            cls.Options.model_validate(given)
        except ValidationError as exc:
            raw = _raw_options(where, label)
            known = ", ".join(cls.Options.model_fields) or "none"
            hint = f": {adapter} has no such option (its options: {known}; `bakeoff list backends --options`)"
            raise pydantic_error(exc, where, raw if isinstance(raw, dict) else given, ("backends", label),
                                 unknown_hint=hint) from None
