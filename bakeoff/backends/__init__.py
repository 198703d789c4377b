"""Backend registry: adapters are found by name and imported only when asked for.

Importing this package imports no compiler (no JAX, IREE, ONNX Runtime, TensorRT, Triton).
"""
from __future__ import annotations

import importlib
from functools import cache

from bakeoff.backends.base import Backend, Compiled, CompileInfo, TensorSpec

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


class UnknownBackend(KeyError):
    def __str__(self) -> str:
        return f"unknown backend {self.args[0]!r}; known: {', '.join(REGISTRY)}"


@cache
def backend_class(name: str) -> type[Backend]:
    """The Backend class registered under `name`, imported now."""
    target = REGISTRY.get(name) or HIDDEN.get(name)
    if target is None:
        raise UnknownBackend(name)
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)


def get_backend(name: str) -> Backend:
    return backend_class(name)()


def known(name: str) -> bool:
    return name in REGISTRY or name in HIDDEN


__all__ = ["Backend", "Compiled", "CompileInfo", "TensorSpec", "REGISTRY", "get_backend", "backend_class",
           "known", "UnknownBackend"]
