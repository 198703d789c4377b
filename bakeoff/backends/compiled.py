"""The values a backend hands back (backends/base.py is the protocol that makes them): the inputs' specs, what
a compile produced besides the executable, and the executable itself. Kept apart from the protocol so the
shape-sweep servers (backends/sweep_server.py), which the protocol's default builds, need not import it."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Sequence

from bakeoff.workloads.ir import Graph


@dataclass(frozen=True)
class TensorSpec:
    """Shape and dtype of one graph input, as the harness will pass it (contiguous)."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @classmethod
    def of_inputs(cls, graph: Graph) -> list["TensorSpec"]:
        """The specs of a bound graph's inputs, in graph order."""
        return [cls(n.attr("name"), tuple(n.shape), n.dtype) for n in graph.inputs]


@dataclass
class CompileInfo:
    """What a compile produced besides the executable.

    stages_s: named compile stages in seconds (e.g. {"trace": .., "lower": .., "compile": ..}); empty if
    the backend has no stages it can time apart.
    cache_dirs: folders the backend reads and writes its caches in (the harness counts entries before and
    after, to tell a cache hit from a miss).
    notes: facts the record must carry (e.g. "compiled for sm_89: the compiler knows no sm_90").
    compiler_stages: the keys of `stages_s` that are the compiler's own work (IREE: iree-compile; ONNX Runtime:
    session creation; TensorRT: the engine build). When given, the harness's headline `compile_s` is their
    sum and the whole span (compile() + prepare + first run + sync) is kept apart as the record's
    `compile_total_s` (`stages_s["first_run"]` = prepare + first run + sync). Empty: `compile_s` is
    that whole span, as for eager, Inductor (compiles lazily inside the first call), XLA and tritongen.
    lowering: which route each composite op of the graph took into the framework, in words, by op name (e.g.
    {"sdpa": "native: ONNX Attention (opset 23)"}); the record's `lowering`. Empty where not told.
    """

    stages_s: dict[str, float] = field(default_factory=dict)
    cache_hit: bool | None = None
    notes: list[str] = field(default_factory=list)
    compiler_stages: tuple[str, ...] = ()
    lowering: dict[str, str] = field(default_factory=dict)


class Compiled(ABC):
    """An executable for one graph, shapes, dtype and device."""

    info: CompileInfo

    def prepare(self, inputs: Sequence[Any]) -> Any:
        """Turn torch input tensors into what `run` takes (default: the tensors themselves). Not timed."""
        return tuple(inputs)

    @abstractmethod
    def run(self, prepared: Any) -> Any:
        """Launch the computation on prepared inputs; may return before the device is done."""

    @abstractmethod
    def to_torch(self, raw: Any) -> list[Any]:
        """The outputs of `run` as torch tensors on the harness device. Not timed."""

    def sync(self) -> None:
        """Block until all work this executable launched has finished."""

    def artifacts(self) -> dict[str, Any] | None:
        """Text or numbers worth keeping (generated code, IR, sizes); None when the backend has none."""
        return None

    def __call__(self, *inputs: Any) -> list[Any]:
        raw = self.run(self.prepare(inputs))
        self.sync()
        return self.to_torch(raw)
