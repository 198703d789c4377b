"""HTML page assembly: plotly.js (embedded, CDN or a shared file), chart divs, sortable tables, the page."""
from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Literal

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

PlotlyJs = Literal["inline", "cdn", "file"]
PLOTLY_FILE = "plotly.min.js"

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1500px}
h1{font-size:1.5em} h2{margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
th,td{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f4f4f4} table.sortable th{cursor:pointer;user-select:none}
table.sortable th.asc::after{content:" ▲"} table.sortable th.desc::after{content:" ▼"}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#080}.bad{color:#c00;font-weight:600}.warn{color:#b60;font-weight:600}.dim{color:#888}
.banner{background:#fff4e0;border:1px solid #e0a040;padding:8px 12px;margin:10px 0}
.note{color:#555;font-size:13px}
details.noise summary{cursor:pointer} details.noise ul{margin:2px 0 0 14px;padding:0;min-width:22em}
details.why summary{cursor:pointer;color:#36c} details.why ul{margin:2px 0 0 14px;padding:0;min-width:36em}
details.fold{margin:6px 0;border-top:1px solid #ddd} details.fold>summary{cursor:pointer;padding:6px 0}
details.fold>summary h2{display:inline;border:0;font-size:1.15em;margin:0}
input.filter{font-size:13px;padding:3px 6px;width:28em;margin:4px 0}
"""

# Click a header to sort by it; numbers sort by the cell's data-v, missing values last.
SORT_JS = """
document.querySelectorAll('table.sortable').forEach(function(t){
  t.querySelectorAll('th').forEach(function(th,i){
    th.addEventListener('click',function(){
      var asc=!th.classList.contains('asc');
      t.querySelectorAll('th').forEach(function(h){h.classList.remove('asc','desc');});
      th.classList.add(asc?'asc':'desc');
      var body=t.tBodies[0], rows=Array.prototype.slice.call(body.rows);
      function key(r){var c=r.cells[i];var v=c.getAttribute('data-v');
        if(v===null||v===''){return null;} var n=parseFloat(v); return isNaN(n)?v.toLowerCase():n;}
      rows.sort(function(a,b){var x=key(a),y=key(b);
        if(x===null&&y===null)return 0; if(x===null)return 1; if(y===null)return -1;
        var r=(typeof x==='number'&&typeof y==='number')?x-y:String(x).localeCompare(String(y));
        return asc?r:-r;});
      rows.forEach(function(r){body.appendChild(r);});
    });
  });
});
"""

# Filter a table as one types: rows whose text lacks any of the typed words are hidden.
FILTER_JS = """
document.querySelectorAll('input.filter').forEach(function(inp){
  var t=document.getElementById(inp.getAttribute('data-table')), count=inp.nextElementSibling;
  inp.addEventListener('input',function(){
    var words=inp.value.toLowerCase().split(/\\s+/).filter(Boolean), shown=0;
    Array.prototype.forEach.call(t.tBodies[0].rows,function(r){
      var text=r.textContent.toLowerCase(), ok=words.every(function(w){return text.indexOf(w)>=0;});
      r.style.display=ok?'':'none'; shown+=ok;});
    if(count){count.textContent=shown+' of '+t.tBodies[0].rows.length+' rows';}
  });
});
"""

# Charts inside a closed <details> are drawn when it first opens (a hidden chart has no width, and drawing
# every chart up front slows the page's load); `bakeoffReveal(id)` opens the folds around an element and
# scrolls to it, for links and clicks that lead into a fold.
FOLD_JS = """
function bakeoffDraw(root){
  var due=[].filter.call(root.querySelectorAll('.lazy-plot:not([data-drawn])'),function(div){
    return !div.closest('details:not([open])');});
  if(!due.length){return;}
  if(typeof Plotly==='undefined'){  // fetched on first need (html.plotly_js_loader), then drawn
    if(window.bakeoffLoadPlotly){window.bakeoffLoadPlotly().then(function(){bakeoffDraw(root);});}
    return;
  }
  due.forEach(function(div){
    var fig=JSON.parse(document.getElementById(div.id+'-json').textContent);
    div.setAttribute('data-drawn','1');
    Plotly.newPlot(div,fig.data,fig.layout,{displaylogo:false,responsive:true});
  });
}
window.bakeoffReveal=function(id){
  var el=document.getElementById(id); if(!el){return;}
  for(var d=el.closest('details');d;d=d.parentElement.closest('details')){d.open=true;}
  bakeoffDraw(document); el.scrollIntoView();
};
document.querySelectorAll('details').forEach(function(d){
  d.addEventListener('toggle',function(){ if(d.open){bakeoffDraw(d);} });
});
document.addEventListener('click',function(e){
  var a=e.target.closest?e.target.closest('a.reveal'):null;
  if(a){e.preventDefault(); window.bakeoffReveal(a.getAttribute('href').slice(1));}
});
bakeoffDraw(document);
"""


@dataclass(frozen=True)
class Cell:
    """A table cell: its shown text (escaped unless `raw`), its sort value, a CSS class."""

    text: str
    sort: float | str | None = None
    cls: str = ""
    raw: bool = False


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def plotly_js_tag(mode: PlotlyJs) -> str:
    """The <script> that loads plotly.js: embedded (offline, ~4.5 MB), from the CDN, or from PLOTLY_FILE."""
    if mode == "inline":
        return f"<script>{get_plotlyjs()}</script>"
    if mode == "file":
        return f'<script src="{PLOTLY_FILE}"></script>'
    snippet = go.Figure().to_html(include_plotlyjs="cdn", full_html=False)
    found = re.search(r'<script[^>]*src="https://cdn\.plot\.ly/[^"]+"[^>]*></script>', snippet)
    return found.group(0) if found else '<script src="https://cdn.plot.ly/plotly-latest.min.js"></script>'


def figure_div(fig: go.Figure | None, div_id: str, missing: str) -> str:
    """A chart as a div (plotly.js loaded once by the page), or a note saying why there is none."""
    if fig is None:
        return f'<p class="note">{esc(missing)}</p>'
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id,
                       config={"displaylogo": False, "responsive": True})


def lazy_figure_div(fig: go.Figure | None, div_id: str, missing: str) -> str:
    """A chart drawn when the fold around it first opens (FOLD_JS), or a note saying why there is none."""
    if fig is None:
        return f'<p class="note">{esc(missing)}</p>'
    data = fig.to_json().replace("</", "<\\/")
    return (f'<div id="{esc(div_id)}" class="lazy-plot"></div>'
            f'<script type="application/json" id="{esc(div_id)}-json">{data}</script>')


def fold(summary_html: str, body: str, open_: bool = False, fold_id: str = "") -> str:
    """A section one click away: its heading (`summary_html`, raw HTML) always shown, `body` when opened."""
    ident = f' id="{esc(fold_id)}"' if fold_id else ""
    return f'<details class="fold"{ident}{" open" if open_ else ""}><summary>{summary_html}</summary>{body}</details>'


def filter_box(table_id: str) -> str:
    """A text box that filters the rows of table `table_id` (FILTER_JS), with the count of rows shown."""
    return (f'<input class="filter" data-table="{esc(table_id)}" placeholder="filter rows: type words, e.g. '
            f'softmax float16 noisy"><span class="note"></span>')


def table(headers: list[str], body: list[list[Cell]], sortable: bool = True, table_id: str = "") -> str:
    """An HTML table; with `sortable`, headers sort on click (SORT_JS)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    out = []
    for row in body:
        tds = []
        for c in row:
            attrs = f' data-v="{esc(c.sort)}"' if c.sort is not None else ""
            attrs += f' class="{c.cls}"' if c.cls else ""
            tds.append(f"<td{attrs}>{c.text if c.raw else esc(c.text)}</td>")
        out.append("<tr>" + "".join(tds) + "</tr>")
    ident = f' id="{esc(table_id)}"' if table_id else ""
    cls = ' class="sortable"' if sortable else ""
    return f"<table{ident}{cls}><thead><tr>{head}</tr></thead><tbody>{''.join(out)}</tbody></table>"


def page(title: str, body: str, plotly_js: PlotlyJs, css: str = "", js: str = "", lazy_plotly: bool = False) -> str:
    """A complete HTML document; `css` and `js` are added to the page's own style and script. `lazy_plotly`: a
    page that draws no chart as it loads (only folded ones, FOLD_JS) gets plotly.js when the first is opened
    (`plotly_js_loader`), so the page is shown and usable without parsing plotly.js."""
    head = "" if lazy_plotly else plotly_js_tag(plotly_js)
    tail = plotly_js_loader(plotly_js) if lazy_plotly else ""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<style>{CSS}{css}</style>{head}</head>\n<body>\n{body}\n"
            f"<script>{SORT_JS}{FILTER_JS}{FOLD_JS}{js}</script>\n{tail}</body></html>\n")


def plotly_js_loader(mode: PlotlyJs) -> str:
    """plotly.js fetched when a chart first needs it (`window.bakeoffLoadPlotly()`, a promise; FOLD_JS calls it):
    embedded as text and run from a blob URL (the HTML parser only scans it), or its CDN/file URL. Parsing and
    running plotly.js takes the page's main thread for a second or more on a small machine: not at load."""
    if mode == "inline":
        js = get_plotlyjs().replace("</script", "<\\/script")
        data = f'<script type="text/plain" id="plotly-js">{js}</script>'
        src = ("URL.createObjectURL(new Blob([document.getElementById('plotly-js').textContent],"
               "{type:'text/javascript'}))")
    else:
        data, src = "", repr(re.search(r'src="([^"]+)"', plotly_js_tag(mode)).group(1))
    return (f"{data}<script>window.bakeoffLoadPlotly=function(){{if(!window.bakeoffPlotly){{window.bakeoffPlotly="
            f"new Promise(function(ok,fail){{var s=document.createElement('script');s.src={src};s.onload=ok;"
            f"s.onerror=fail;document.head.appendChild(s);}});}}return window.bakeoffPlotly;}};</script>\n")
