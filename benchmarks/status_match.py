"""Does every case end with the same status on two revisions of the harness? (a change that should keep
behaviour: every case's status matches the old revision's on the same config).

    python benchmarks/status_match.py OLD.json NEW.json     # `bakeoff export RUN_ID --format json` of each run

Cases are matched by (workload, shape, dtype, backend label), as `bakeoff compare` matches them. Prints the
status counts of each side, then every case whose status differs or that only one side has, with both
reasons. Exits 1 when any case differs or is missing on a side, else 0.
"""
from __future__ import annotations

import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bakeoff.results.report.data import case_key  # noqa: E402


def _by_case(path: str) -> dict[tuple, dict]:
    records = json.loads(Path(path).read_text())
    out: dict[tuple, dict] = {}
    for r in records:
        out[case_key(r)] = r  # one record per case and run
    return out


def main(old_path: str, new_path: str) -> int:
    old, new = _by_case(old_path), _by_case(new_path)
    for name, side in (("old", old), ("new", new)):
        counts = collections.Counter(r["status"] for r in side.values())
        print(f"{name}: {len(side)} cases, " + ", ".join(f"{s} {n}" for s, n in sorted(counts.items())))
    differ = 0
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a is not None and b is not None and a["status"] == b["status"]:
            continue
        differ += 1
        label = " / ".join(key)
        print(f"DIFFERS {label}: old {a['status'] if a else 'absent'} ({(a or {}).get('reason') or ''})"
              f" -> new {b['status'] if b else 'absent'} ({(b or {}).get('reason') or ''})")
    same = len(set(old) & set(new)) - sum(1 for k in set(old) & set(new) if old[k]["status"] != new[k]["status"])
    print(f"{same} cases with the same status on both sides, {differ} differing or missing")
    return 1 if differ else 0


if __name__ == "__main__":
    if sys.argv[1:] in (["-h"], ["--help"]):
        print(__doc__)
        sys.exit(0)
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
