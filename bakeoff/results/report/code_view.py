"""The report's "Code and kernels" section: per case, each backend's generated code and IR (files in the
case's artifacts folder) and its kernel table (kernels.py), two backends side by side.

Texts are gzip-compressed, base64-encoded and deduplicated in the page (one <script> block each, not parsed
as script) and decompressed by the browser's DecompressionStream only when a case shows them, so a report
with every backend's code stays small and opens at once. Everything is inserted as text, never as HTML.
"""
from __future__ import annotations

import base64
import gzip
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from bakeoff.results.report.artifacts import Artifact, case_artifacts
from bakeoff.results.report.data import RunData, case_label, run_labels, series_name
from bakeoff.results.report.kernels import kernel_table

CaseKey = tuple[str, str, str, str]  # (run id, workload, shape, dtype)


@dataclass
class CodeSection:
    """The section's HTML, and the index of each case in it (for links from the other tables and charts)."""

    html: str
    case_of: dict[CaseKey, int] = field(default_factory=dict)
    embedded_bytes: int = 0  # of base64 text in the page


class _Blobs:
    """Texts stored once each, compressed."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.tags: list[str] = []
        self.size = 0

    def add(self, text: str) -> int:
        digest = hashlib.sha256(text.encode()).hexdigest()
        if digest not in self.ids:
            data = base64.b64encode(gzip.compress(text.encode(), compresslevel=9, mtime=0)).decode()
            self.ids[digest] = len(self.tags)
            self.tags.append(f'<script type="application/octet-stream" id="blob-{len(self.tags)}">{data}</script>')
            self.size += len(data)
        return self.ids[digest]


def _backend_entry(case: dict[str, Any], artifacts: list[Artifact], note: str, graph: str,
                   blobs: _Blobs) -> dict[str, Any]:
    texts = {a.name: a.text for a in artifacts if a.text is not None}
    texts.setdefault("graph", graph)  # the case's graph, for backends that do not save it (node names)
    rows = kernel_table(case, texts)
    profiled = bool(case.get("kernel_times"))
    return {"backend": str(case.get("backend")), "adapter": str(case.get("adapter") or case.get("backend")),
            "status": str(case.get("status")), "note": note,
            "profiled": profiled, "device_ms": case.get("device_ms"), "kernel_count": case.get("kernel_count"),
            "profile_error": case.get("profile_error"), "device": case.get("device"),
            "profile_off": (case.get("timing_settings") or {}).get("profile") is False,
            "artifacts": [{"name": a.name, "bytes": a.size_bytes, "note": a.note,
                           "blob": None if a.text is None else blobs.add(a.text)} for a in artifacts],
            "kernels": [r.to_json() for r in rows]}


def code_section(runs: list[RunData]) -> CodeSection:
    """The section over every case (workload, shape, dtype) of every run, each with its backends."""
    labels = run_labels(runs)
    blobs = _Blobs()
    cases: list[dict[str, Any]] = []
    cells: dict[str, list] = {}  # heatmap cell (case label, series) -> [case index, backend]
    out = CodeSection("")
    found: dict[CaseKey, list[tuple[dict[str, Any], list[Artifact], str]]] = {}
    for r in runs:
        for c in r.cases:
            key = (r.run_id, str(c.get("workload")), str(c.get("shape")), str(c.get("dtype")))
            if key not in out.case_of:
                out.case_of[key] = len(cases)
                label = case_label(c) + (f" · {labels[r.run_id]}" if labels[r.run_id] else "")
                cases.append({"label": label, "backends": []})
            found.setdefault(key, []).append((c, *case_artifacts(c)))
            cells[case_label(c) + "\u0000" + series_name(c, labels[r.run_id])] = [out.case_of[key],
                                                                                 str(c.get("backend"))]
    for key, backends in found.items():
        graph = next((a.text for _, arts, _ in backends for a in arts if a.name == "graph" and a.text), "")
        cases[out.case_of[key]]["backends"] = [_backend_entry(c, arts, note, graph, blobs)
                                               for c, arts, note in backends]
    if not cases:
        out.html = '<p class="note">no cases</p>'
        return out
    index = json.dumps({"cases": cases, "cells": cells}, default=str).replace("</", "<\\/")
    pane = ('<div class="code-pane" id="code-{side}"><div class="code-bar"><select class="code-backend" '
            'aria-label="backend ({side})"></select> <select class="code-artifact" aria-label="artifact ({side})">'
            '</select> <span class="code-meta note"></span></div><div class="code-kernels"></div>'
            '<pre class="code-text" data-state="empty"></pre></div>')
    out.embedded_bytes = blobs.size
    out.html = ('<p class="note">Per case, what each backend generated (its artifacts: output code, IR, graph '
                "texts) and its kernels: on a GPU every kernel CUPTI saw in one call, with its share of the "
                "call, tied where its name allows to the generated kernel, the graph ops it fuses and its source "
                "line (click the line to open it); without a profile the kernels as generated. Two backends side "
                "by side; a code link in the case table or a click on a heatmap cell opens a case here. Texts "
                f"are compressed in the page ({blobs.size / 1e6:.2f} MB for {len(blobs.tags)} distinct texts) "
                "and decompressed when shown.</p>"
                '<div id="code-view"><label>case <select id="code-case"></select></label>'
                f'<div class="code-panes">{pane.format(side="left")}{pane.format(side="right")}</div></div>'
                f'<script type="application/json" id="code-index">{index}</script>' + "".join(blobs.tags))
    return out


CODE_CSS = """
.code-panes{display:flex;gap:12px;align-items:flex-start;margin-top:8px}
.code-pane{flex:1 1 0;min-width:0;border:1px solid #ddd;padding:6px}
.code-bar{margin-bottom:6px} .code-bar select{max-width:45%}
.code-text{position:relative;max-height:640px;overflow:auto;background:#fafafa;border:1px solid #e4e4e4;
  padding:6px;margin:6px 0 0;font-size:12px;line-height:1.35;tab-size:4}
.code-text mark{background:#ffe58a}
.kernel-wrap{max-height:360px;overflow:auto}
table.kernel-table{font-size:12px;width:100%;margin:0} table.kernel-table td.kname{font-family:monospace;
  min-width:12em;max-width:26em} table.kernel-table button{font-size:11px;cursor:pointer;white-space:nowrap}
"""

CODE_JS = r"""
(function () {
  var indexEl = document.getElementById('code-index');
  if (!indexEl) { return; }
  var index = JSON.parse(indexEl.textContent), texts = {};
  var caseSel = document.getElementById('code-case');
  function size(n) { return n < 1024 ? n + ' B' : n < 1048576 ? (n / 1024).toFixed(1) + ' kB'
                                                              : (n / 1048576).toFixed(1) + ' MB'; }
  function fixed(x, d) { return x === null || x === undefined ? '-' : Number(x).toFixed(d); }
  function el(tag, text, cls) { var e = document.createElement(tag); if (text !== undefined) { e.textContent = text; }
                                if (cls) { e.className = cls; } return e; }
  function blobText(id) {  // a promise of the decompressed text, made once per blob
    if (!texts[id]) {
      var raw = atob(document.getElementById('blob-' + id).textContent.trim()), bytes = new Uint8Array(raw.length);
      for (var i = 0; i < raw.length; i++) { bytes[i] = raw.charCodeAt(i); }
      var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
      texts[id] = new Response(stream).text();
    }
    return texts[id];
  }
  function current() { return index.cases[+caseSel.value]; }
  function entry(name) { return current().backends.filter(function (b) { return b.backend === name; })[0]; }
  function fill(sel, values, labels, chosen) {
    sel.textContent = '';
    values.forEach(function (v, i) { var o = el('option', labels[i]); o.value = v; sel.appendChild(o); });
    if (values.indexOf(chosen) >= 0) { sel.value = chosen; }
  }
  var panes = Array.prototype.map.call(document.querySelectorAll('.code-pane'), function (node) {
    var p = {backend: node.querySelector('.code-backend'), artifact: node.querySelector('.code-artifact'),
             meta: node.querySelector('.code-meta'), kernels: node.querySelector('.code-kernels'),
             pre: node.querySelector('.code-text'), token: 0};
    p.backend.addEventListener('change', function () { showBackend(p, p.backend.value); });
    p.artifact.addEventListener('change', function () { showArtifact(p, p.artifact.value); });
    return p;
  });
  function render(p, text, line) {
    p.pre.textContent = '';
    if (!line) { p.pre.textContent = text; p.pre.scrollTop = 0; return; }
    var lines = text.split('\n'), mark = el('mark', lines[line - 1] || '');
    var before = lines.slice(0, line - 1).join('\n'), after = lines.slice(line).join('\n');
    p.pre.append(before ? before + '\n' : '', mark, after ? '\n' + after : '');
    p.pre.scrollTop = Math.max(0, mark.offsetTop - 60);
  }
  function showArtifact(p, name, line) {
    var a = entry(p.backend.value).artifacts.filter(function (x) { return x.name === name; })[0];
    var token = ++p.token;
    p.artifact.value = name;
    p.pre.dataset.artifact = name;
    p.meta.textContent = size(a.bytes) + (line ? ', line ' + line : '');
    if (a.blob === null) { p.pre.textContent = a.note; p.pre.dataset.state = 'note'; return; }
    p.pre.dataset.state = 'loading';
    p.pre.textContent = 'decompressing…';
    blobText(a.blob).then(function (text) {
      if (token !== p.token) { return; }
      render(p, text, line);
      p.pre.dataset.state = 'ready';
    }, function (err) { p.pre.textContent = 'cannot decompress: ' + err; p.pre.dataset.state = 'error'; });
  }
  function kernelTable(p, b) {
    p.kernels.textContent = '';
    var why = b.profile_error ? 'the profiler gave none (' + b.profile_error + ')'
            : b.device === 'cpu' ? 'no CUPTI on a CPU (kernel times and shares of a call are measured on a GPU only)'
            : b.profile_off ? 'the config turned the profiler off (timing.profile: false)'
            : b.status === 'ok' ? 'the record holds no kernel list' : 'the case ended ' + b.status + ' before it';
    var head = b.profiled ? 'CUPTI saw ' + b.kernels.filter(function (k) { return k.launches !== null; }).length
                            + ' kernel name(s), ' + fixed(b.device_ms, 4) + ' ms device time per call'
             : 'kernel times not measured: ' + why + (b.kernels.length ? '. The kernels as generated:'
               : b.adapter === 'eager' ? '. Eager runs ATen\'s own kernels: none generated.'
               : '. No kernel found in the artifacts.');
    p.kernels.appendChild(el('p', head, 'note kernel-head'));
    if (!b.kernels.length) { return; }
    // Columns with nothing to show are left out: the profile's without a profile, facts where none is known.
    var facts = b.kernels.some(function (k) { return k.facts; });
    var heads = ['kernel'].concat(b.profiled ? ['launches / call', 'device ms / call', 'share'] : [],
                                  ['made by', 'computes'], facts ? ['facts'] : [], ['source']);
    var wrap = el('div', undefined, 'kernel-wrap'), t = wrap.appendChild(el('table', undefined, 'kernel-table'));
    var tr = el('tr');
    heads.forEach(function (h) { tr.appendChild(el('th', h)); });
    t.appendChild(el('thead')).appendChild(tr);
    var body = t.appendChild(el('tbody'));
    b.kernels.forEach(function (k) {
      var row = body.appendChild(el('tr')), name = row.appendChild(el('td', undefined, 'kname'));
      k.name.split(/(?<=[_:<>,.])/).forEach(function (part) {  // break long names at _ : < > , . only
        name.append(part); name.appendChild(document.createElement('wbr'));
      });
      if (b.profiled) {
        row.appendChild(el('td', fixed(k.launches, 1), 'num'));
        row.appendChild(el('td', fixed(k.device_ms, 4), 'num'));
        row.appendChild(el('td', k.share === null ? '-' : (100 * k.share).toFixed(1) + '%', 'num'));
      }
      row.appendChild(el('td', k.origin + (k.matched && k.matched !== 'name' ? ' (by ' + k.matched + ')' : '')));
      row.appendChild(el('td', k.fused));
      if (facts) { row.appendChild(el('td', k.facts)); }
      var src = row.appendChild(el('td'));
      if (k.artifact) {
        var btn = src.appendChild(el('button', k.artifact + (k.line ? ':' + k.line : ''), 'open-source'));
        btn.addEventListener('click', function () { showArtifact(p, k.artifact, k.line); });
      }
    });
    p.kernels.appendChild(wrap);
  }
  function showBackend(p, name, artifact, line) {
    var b = entry(name);
    p.backend.value = name;
    fill(p.artifact, b.artifacts.map(function (a) { return a.name; }),
         b.artifacts.map(function (a) { return a.name + ' (' + size(a.bytes) + ')'; }), artifact);
    kernelTable(p, b);
    if (!b.artifacts.length) {
      p.pre.textContent = b.note || 'no artifacts'; p.pre.dataset.state = 'note'; p.meta.textContent = ''; return;
    }
    showArtifact(p, p.artifact.value, line);
  }
  function showCase(i, left) {
    caseSel.value = i;
    var bs = current().backends, names = bs.map(function (b) { return b.backend; });
    var labels = bs.map(function (b) { return b.backend + (b.status === 'ok' ? '' : ' (' + b.status + ')'); });
    var coded = names.filter(function (n, k) { return bs[k].artifacts.length && bs[k].adapter !== 'eager'; });
    var first = names.indexOf(left) >= 0 ? left : (coded[0] || names[0]);
    var second = coded.filter(function (n) { return n !== first; })[0]
                 || names.filter(function (n) { return n !== first; })[0] || first;
    [first, second].forEach(function (name, k) {
      if (!panes[k]) { return; }
      fill(panes[k].backend, names, labels, name);
      showBackend(panes[k], name);
    });
  }
  index.cases.forEach(function (c, i) { var o = el('option', c.label); o.value = i; caseSel.appendChild(o); });
  caseSel.addEventListener('change', function () { showCase(+caseSel.value); });
  document.addEventListener('click', function (e) {
    var a = e.target.closest ? e.target.closest('a.open-code') : null;
    if (!a) { return; }
    e.preventDefault();
    showCase(+a.dataset.case, a.dataset.backend);
    window.bakeoffReveal('code');
  });
  var heat = document.getElementById('speedup');
  if (heat) {  // a heatmap cell (charts_heatmap.py): its case label and series
    heat.addEventListener('click', function (e) {
      var td = e.target.closest ? e.target.closest('td[data-case]') : null;
      var hit = td && index.cells[td.dataset.case + '\u0000' + td.dataset.x];
      if (hit) { showCase(hit[0], hit[1]); window.bakeoffReveal('code'); }
    });
  }
  window.bakeoffShowCase = showCase;
  showCase(0);
})();
"""
