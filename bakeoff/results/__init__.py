"""The results store (SQLAlchemy Core; SQLite at results/bakeoff.db by default) and its exports."""
from bakeoff.results.store import Store, StoreError, default_url

__all__ = ["Store", "StoreError", "default_url"]
