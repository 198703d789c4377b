"""A resume must run in the environment its run started in: the same harness revision and software stack.

A run's records share one fingerprint and harness revision (stored with the run); a resume after the code
changed (a new commit, uncommitted edits) or another torch would add records of another environment under
them, and nothing would show that the run mixes the two. So a resume in another environment is refused,
naming what changed; the way on is a new run.
"""
from __future__ import annotations

from typing import Any

from bakeoff.harness.measure.environment import FINGERPRINT_KEYS
from bakeoff.harness.run.executors.protocol import ExecutorError
from bakeoff.results.report.envdiff import env_diff


class EnvironmentChanged(ExecutorError):
    """The environment here is not the one the run started in."""


def check_same_environment(run: dict[str, Any], env: dict[str, Any]) -> None:
    """Raise EnvironmentChanged when `env` (where the resumed cases would run) has another fingerprint than
    the stored `run`. A run stored without a fingerprint is not checked."""
    if not run.get("fingerprint") or run["fingerprint"] == env.get("fingerprint"):
        return
    stored = {**(run.get("environment") or {}), "harness_rev": run.get("harness_rev")}
    changes = environment_changes(stored, env) or [f"fingerprint {run['fingerprint']} -> {env.get('fingerprint')}"]
    raise EnvironmentChanged(f"cannot resume run {run['run_id']}: {', '.join(changes)}: resuming would mix "
                             f"records of two environments; start a new run")


def environment_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """'FIELD OLD -> NEW' for each fingerprinted field that differs, the harness revision first, then each
    package version (None: not installed)."""
    fields = ("harness_rev",) + tuple(k for k in FINGERPRINT_KEYS if k not in ("harness_rev", "versions"))
    return [f"{c.field.removeprefix('versions.')} {c.before} -> {c.after}" for c in env_diff(old, new, fields)]
