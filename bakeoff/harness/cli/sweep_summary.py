"""One compact line per shape-sweep case under the terminal summary (`bakeoff run`, `bakeoff show`):
compiles (and where), the time to serve the sweep, points ok, and the headline latency at the ends."""
from __future__ import annotations

from typing import Any, Iterable

from rich.text import Text

from bakeoff.harness.cli.cells import STATUS_STYLE, fmt_ms, stored_flat


def sweep_line(r: dict[str, Any]) -> Text:
    """`attention/…S=sweep[128..4096]…/inductor-dynamic: 1 compile · serve 2.31 s · 6/6 points ok · 0.12 ms @
    S=128 … 3.4 ms @ S=4096` (a skipped or failed sweep: its status and reason)."""
    points = r.get("sweep") or []
    head = Text.assemble(Text("sweep ", style="bold"), f"{r.get('case_id')}: ")
    status = str(r.get("status") or "?")
    if not points:
        return head.append(Text(f"{status}: {str(r.get('reason') or '')[:120]}", style=STATUS_STYLE.get(status, "red")))
    compiles, at = r.get("sweep_compiles"), r.get("sweep_recompiled_at") or []
    word = "compile" if compiles == 1 else "compiles"
    head.append(f"{compiles if compiles is not None else '?'} {word}")
    if at and compiles:
        head.append(f" (at {r.get('sweep_dim')}={','.join(str(v) for v in at[:8])}{'…' if len(at) > 8 else ''})",
                    style="dim")
    serve = r.get("sweep_serve_s")
    head.append(" · serve " + (f"{serve:.3g} s" if serve is not None else "- (a point failed)"))
    ok = r.get("sweep_points_ok", 0)
    head.append(f" · {ok}/{len(points)} points ok", style="green" if ok == len(points) else "red")
    timed = [p for p in points if p.get("headline_ms") is not None]
    if timed:
        lo, hi = min(timed, key=lambda p: p["value"]), max(timed, key=lambda p: p["value"])
        dim = r.get("sweep_dim")
        head.append(f" · {fmt_ms(lo['headline_ms'])} ms @ {dim}={lo['value']}")
        if hi is not lo:
            head.append(f" … {fmt_ms(hi['headline_ms'])} ms @ {dim}={hi['value']}")
    if status != "ok":
        head.append(f" · {status}: {str(r.get('reason') or '')[:100]}", style=STATUS_STYLE.get(status, "red"))
    return head


def sweep_lines(records: Iterable[dict[str, Any]]) -> list[Text]:
    return [sweep_line(r) for r in map(stored_flat, records) if r.get("sweep_dim") and r.get("status") != "skipped"]
