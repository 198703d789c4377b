"""The results store (SQLAlchemy Core; SQLite at results/bakeoff.db by default: `bakeoff.results.store`), the
record model and its exports. Nothing is imported here: a worker imports `results.record` and
`results.hardware` without loading SQLAlchemy."""
