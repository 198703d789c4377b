"""bakeoff: one set of workload definitions compiled through every ML compiler backend, timed and diffed.

The flow reads from the folder names: workloads (the IR and the suite) -> harness.config -> harness.plan ->
harness.run (orchestrator, executors) -> harness.supervise (a case's worker processes, slots, the timing
gate) -> harness.worker (one case's process, a pipeline of stages) -> harness.measure (timing, numerics, checks,
environment, calibration) -> results (the store, exports, reports) -> harness.cli. backends holds one adapter per compiler.
"""
