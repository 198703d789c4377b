"""Reports over the results store: an HTML report of runs, a comparison of two runs, a static dashboard of
the history. Everything here reads the store only; nothing is re-run.

Modules, one idea each: `data` (records as flat cases, keys, labels), `envdiff` (what changed between two
environments), `weights` (user weights and the per-workload recommendation), `charts_*` (plotly charts),
`html` (page assembly), `report` (the report page), `compare` and `compare_format` (two runs),
`trend` (the regression rule over a series), `dashboard` (the static site).
"""
