"""Backend registry: adapters are found by name and imported only when asked for.

Built-in adapters are listed in REGISTRY; adapters from other distributions register under the entry-point
group `bakeoff.backends` (see backends/base.py for the protocol and how to register). Importing this package
imports no compiler (no JAX, IREE, ONNX Runtime, TensorRT, Triton) and no plugin module.
"""
from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass
from functools import cache

from bakeoff.backends.base import Backend, Compiled, CompileInfo, TensorSpec
from bakeoff.backends.options import BackendOptions

ENTRY_POINT_GROUP = "bakeoff.backends"
BUILTIN = "built-in"

# name -> "module:Class". Order is the display order.
REGISTRY: dict[str, str] = {
    "eager": "bakeoff.backends.eager:EagerBackend",
    "inductor": "bakeoff.backends.inductor:InductorBackend",
    "tritongen": "bakeoff.backends.tritongen:TritonGenBackend",
    "xla": "bakeoff.backends.xla:XlaBackend",
    "iree": "bakeoff.backends.iree:IreeBackend",
    "onnxruntime": "bakeoff.backends.onnxrt:OnnxRuntimeBackend",
    "tensorrt": "bakeoff.backends.tensorrt:TensorRTBackend",
}
# Test-only backends, reachable by name but not listed nor run by default.
HIDDEN: dict[str, str] = {
    "faulty": "bakeoff.backends.faulty:FaultyBackend",
}
# A backend's name is stored in every record: short, lowercase, stable.
NAME_PATTERN = re.compile(r"[a-z][a-z0-9_.-]{0,63}")
_TARGET = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


@dataclass(frozen=True)
class Plugin:
    """One entry point of the `bakeoff.backends` group. `problem` says why it is not used (a name taken by a
    built-in or by another plugin, a malformed name or value), None when it is registered."""

    name: str
    target: str
    dist: str
    problem: str | None = None


class UnknownBackend(KeyError):
    def __str__(self) -> str:
        return f"unknown backend {str(self.args[0])[:60]!r}; known: {', '.join(names())}"


class BackendLoadError(RuntimeError):
    """A registered backend that cannot be used: its module fails to import, or what it names is not a
    Backend subclass of that name. The message says which backend, where it came from, and why."""


def _dist_label(ep) -> str:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "an unknown distribution"
    return f"{dist.metadata['Name'] or dist.name} {dist.version}"


@cache
def plugins() -> tuple[Plugin, ...]:
    """Every entry point of the `bakeoff.backends` group installed here, each with its problem (if any)."""
    from importlib.metadata import entry_points

    found = [Plugin(ep.name, ep.value, _dist_label(ep)) for ep in entry_points(group=ENTRY_POINT_GROUP)]
    out = []
    for p in found:
        others = [q.dist for q in found if q.name == p.name and q is not p]
        if p.name in REGISTRY or p.name in HIDDEN:
            problem = f"its name {p.name!r} is a built-in backend's; rename the entry point"
        elif others:
            problem = f"its name {p.name!r} is registered by {', '.join(others)} too; uninstall one"
        elif not NAME_PATTERN.fullmatch(p.name):
            problem = f"its name {p.name[:60]!r} is not a backend name (lowercase letters, digits, _ . -)"
        elif not _TARGET.fullmatch(p.target):
            problem = f"its value {p.target[:60]!r} is not module:Class"
        else:
            problem = None
        out.append(Plugin(p.name, p.target, p.dist, problem))
    return tuple(out)


def _registered() -> dict[str, Plugin]:
    return {p.name: p for p in plugins() if p.problem is None}


def names() -> list[str]:
    """Every backend a config may name and `list backends` shows: built-ins, then plugins by name."""
    return list(REGISTRY) + sorted(_registered())


def known(name: str) -> bool:
    return name in REGISTRY or name in HIDDEN or name in _registered()


def origin(name: str) -> str:
    """"built-in", or the distribution (name and version) a plugin backend comes from."""
    plugin = None if name in REGISTRY or name in HIDDEN else _registered().get(name)
    return plugin.dist if plugin else BUILTIN


def _check_class(name: str, obj: object) -> str | None:
    """Why `obj` cannot serve as backend `name`, or None."""
    if not (isinstance(obj, type) and issubclass(obj, Backend)):
        return f"{obj!r} is not a subclass of bakeoff.backends.base.Backend"[:200]
    if getattr(obj, "name", None) != name:
        return f"{obj.__name__}.name is {getattr(obj, 'name', None)!r}, not the registered name {name!r}"
    if inspect.isabstract(obj):
        missing = ", ".join(sorted(obj.__abstractmethods__))
        return f"{obj.__name__} does not implement {missing}"
    if not (isinstance(obj.Options, type) and issubclass(obj.Options, BackendOptions)):
        return f"{obj.__name__}.Options is not a subclass of bakeoff.backends.options.BackendOptions"
    return None


@cache
def backend_class(name: str) -> type[Backend]:
    """The Backend class registered under `name`, imported now. Raises UnknownBackend, or BackendLoadError
    when the backend is registered but cannot be used."""
    builtin = REGISTRY.get(name) or HIDDEN.get(name)
    plugin = None if builtin else _registered().get(name)   # entry points are read only for a non-built-in
    target = builtin or (plugin.target if plugin else None)
    if target is None:
        raise UnknownBackend(name)
    where = f"backend {name!r} ({f'plugin from {plugin.dist}' if plugin else BUILTIN}, {target})"
    module, attr = target.split(":")
    try:
        obj = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (Exception, SystemExit) as exc:  # a plugin's import must not take the CLI down with it
        raise BackendLoadError(f"{where} failed to load: {type(exc).__name__}: {str(exc)[:300]}") from None
    problem = _check_class(name, obj)
    if problem:
        raise BackendLoadError(f"{where} cannot be used: {problem}")
    return obj


def get_backend(name: str) -> Backend:
    return backend_class(name)()


__all__ = ["Backend", "Compiled", "CompileInfo", "TensorSpec", "REGISTRY", "HIDDEN", "ENTRY_POINT_GROUP",
           "Plugin", "plugins", "names", "origin", "get_backend", "backend_class", "known", "UnknownBackend",
           "BackendLoadError"]
