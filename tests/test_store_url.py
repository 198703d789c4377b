"""A plain `postgresql://` URL (what most tools print) opens the store with psycopg (3), the driver bakeoff
installs, not SQLAlchemy's default psycopg2."""
from __future__ import annotations

import pytest

from bakeoff.results.store import Store, engine_url


@pytest.mark.parametrize("given,expected", [
    ("postgresql://u:p%40ss@db.example:5433/bench?sslmode=require",
     "postgresql+psycopg://u:p%40ss@db.example:5433/bench?sslmode=require"),
    ("postgres://db.example/bench", "postgresql+psycopg://db.example/bench"),
    ("postgresql+psycopg://db.example/bench", "postgresql+psycopg://db.example/bench"),
    ("postgresql+psycopg2://db.example/bench", "postgresql+psycopg2://db.example/bench"),  # asked for: kept
    ("sqlite:///results/bakeoff.db", "sqlite:///results/bakeoff.db"),
])
def test_engine_url(given, expected):
    assert engine_url(given) == expected


def test_plain_postgresql_url_opens_with_psycopg(postgres_url):
    plain = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    store = Store(plain)
    assert store.engine.dialect.driver == "psycopg"
    run_id = store.create_run(config_name="c", config_path=None, config_text="", device="cpu",
                              environment={"fingerprint": "f"}, n_cases=0)
    assert Store(postgres_url).run(run_id)["config_name"] == "c"
