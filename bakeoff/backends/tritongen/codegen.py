"""Stage 2, codegen: Triton source text per kernel, from one template module per kernel kind.

Each template returns a `KernelSource`: readable Python with one `@triton.jit` function whose pointer
arguments are the kernel's buffers (shapes and strides are literals: the graph is bound) and whose
`tl.constexpr` arguments are the tunable block sizes; `sizes` is what the grid and the configs need.
"""
from __future__ import annotations


from bakeoff.backends.tritongen import codegen_attention, codegen_matmul, codegen_pointwise, codegen_rowreduce
from bakeoff.backends.tritongen.kernel_plan import Kernel, Plan
from bakeoff.backends.tritongen.source import CodegenTarget, KernelSource


def generate(plan: Plan, kernel: Kernel, target: CodegenTarget) -> KernelSource:
    """The source of `kernel`, from the template of its kind."""
    gen = {"pointwise": codegen_pointwise.generate, "copy": codegen_pointwise.generate,
           "rowreduce": codegen_rowreduce.generate, "matmul": codegen_matmul.generate,
           "attention": codegen_attention.generate}[kernel.kind]
    return gen(plan, kernel, target)


def generate_all(plan: Plan, target: CodegenTarget) -> tuple[KernelSource, ...]:
    """Stage 2 over every kernel of the plan, in launch order."""
    return tuple(generate(plan, k, target) for k in plan.kernels)
