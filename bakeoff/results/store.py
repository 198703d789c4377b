"""Read and write the results store. SQLite by default (results/bakeoff.db), any SQLAlchemy URL by --db.

The orchestrator is the only writer of its run: it holds the run's lease (results/leases.py, a row with its
owner and heartbeat) and every write it makes checks that lease in the write's own transaction, so an
orchestrator whose lease was taken over writes nothing more. Each record (results/record.py) is inserted in
its own transaction, so a case is either entirely in the store or not at all, and (run, case) is unique: a
second insert of the same case is refused, not duplicated. Several runs may write one database at once (SQLite in WAL mode with a busy
timeout; PostgreSQL through `postgresql+psycopg://`). Opening a store creates or upgrades its schema under
an exclusive lock (a SQLite file, and its folders, are created): a command that only reads checks
`require_store` first. Names from configs reach SQL only as bound parameters (Core).
"""
from __future__ import annotations

import datetime as dt
import math
import secrets
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from sqlalchemy import create_engine, event, func, insert, make_url, select, text, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError

from bakeoff.results import leases, migrations, schema
from bakeoff.results.deferred_interrupt import sigint_deferred
from bakeoff.results.errors import StoreError  # raised here; defined apart so that the CLI names it cheaply
from bakeoff.results.hardware import hardware_id
from bakeoff.results.leases import LeaseClaim, LeaseHolder
from bakeoff.results.record import CaseRecord
from bakeoff.results.renamed_fields import current_names
from bakeoff.results.stored_record import StoredRecord
from bakeoff.results.schema import RECORD_COLUMNS, SCHEMA_VERSION, ceilings, records, runs, schema_info

DEFAULT_DB = Path("results") / "bakeoff.db"


def default_url() -> str:
    return f"sqlite:///{DEFAULT_DB}"


def engine_url(url: str) -> str:
    """`url` with a plain PostgreSQL URL (`postgresql://`, `postgres://`) given the psycopg (3) driver, the
    one bakeoff installs; SQLAlchemy would otherwise pick psycopg2. Other URLs are returned unchanged."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        return parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
    return url


def sqlite_file(url: str) -> Path | None:
    """The database file of a SQLite URL; None for an in-memory database, another database or a malformed URL
    (opening the store reports that one)."""
    try:
        parsed = make_url(url)
    except Exception:  # sqlalchemy.exc.ArgumentError, ValueError: not a URL
        return None
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def require_store(url: str | None) -> None:
    """Raise StoreError when `url` (None: the default store) names a SQLite file that does not exist. The
    commands that only read the store call this before opening it, since opening creates a missing store;
    the commands that write (run, calibrate) create it."""
    file = sqlite_file(url or default_url())
    if file is not None and not file.is_file():
        raise StoreError(f"no results store at {file}: run `bakeoff run` first, or check --db")


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _clean(value: Any) -> Any:
    """JSON-safe values: NaN and infinities become None (JSON has no spelling for them)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, str) and "\x00" in value:  # PostgreSQL text cannot hold NUL
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


# Key of the PostgreSQL advisory lock held while a store's schema is created or upgraded ("bake").
_SCHEMA_LOCK_KEY = 0x62616B65
_INIT_ATTEMPTS = 5


class Store:
    """A results database. `url` is any SQLAlchemy URL; SQLite files and folders are created on first use
    (see `require_store`)."""

    def __init__(self, url: str | None = None) -> None:
        self.url = engine_url(url or default_url())
        file = sqlite_file(self.url)
        if file is not None:
            file.parent.mkdir(parents=True, exist_ok=True)
        self.engine: Engine = create_engine(self.url, future=True)
        if self.engine.dialect.name == "sqlite":
            event.listen(self.engine, "connect", _sqlite_pragmas)
            event.listen(self.engine, "begin", _sqlite_begin)
        elif self.engine.dialect.name == "postgresql":
            event.listen(self.engine, "connect", _postgresql_session)
        self.upgraded_to: list[int] = []  # schema versions this open upgraded the store through
        self._init_schema()

    @property
    def safe_url(self) -> str:
        """The URL with any password masked, for messages."""
        return make_url(self.url).render_as_string(hide_password=True)

    @contextmanager
    def _write(self, run_id: str | None = None, lease: str | None = None) -> Iterator[Connection]:
        """A write transaction; with `lease`, first checks that this token still holds `run_id`'s lease and
        keeps that row locked until commit (raises leases.LeaseLost). SQLite: BEGIN IMMEDIATE. Ctrl-C takes
        effect after it (deferred_interrupt.py)."""
        with sigint_deferred(), self.engine.connect() as conn:
            conn.execution_options(bakeoff_immediate=True)
            with conn.begin():
                if lease is not None and run_id is not None:
                    leases.check(conn, run_id, lease)
                yield conn

    @contextmanager
    def _exclusive(self) -> Iterator[Connection]:
        """A transaction that no other process's `_exclusive` overlaps (SQLite: BEGIN IMMEDIATE; PostgreSQL:
        a transaction-scoped advisory lock). Ctrl-C takes effect after it."""
        with sigint_deferred(), self.engine.connect() as conn:
            conn.execution_options(bakeoff_immediate=True)
            with conn.begin():
                if conn.dialect.name == "postgresql":
                    conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _SCHEMA_LOCK_KEY})
                yield conn

    def _init_schema(self) -> None:
        """Create the tables of an empty database, or upgrade an older one, under an exclusive lock."""
        for attempt in range(_INIT_ATTEMPTS):
            try:
                with self._exclusive() as conn:
                    version = migrations.stored_version(conn)
                    if version is None:
                        schema.metadata.create_all(conn)
                        conn.execute(insert(schema_info).values(key="schema_version", value=str(SCHEMA_VERSION)))
                    else:
                        self.upgraded_to = migrations.upgrade(conn, version)
                        schema.metadata.create_all(conn)  # tables a version added, when absent
                return
            except migrations.MigrationError as exc:
                raise StoreError(f"{self.safe_url}: {exc}") from None
            except DBAPIError:
                # Another process created the tables between our check and our DDL (databases without
                # transactional DDL locks): look again.
                if attempt == _INIT_ATTEMPTS - 1:
                    raise
                time.sleep(0.2 * (attempt + 1))

    # runs
    def create_run(self, *, config_name: str, config_path: str | None, config_text: str, device: str,
                   environment: dict[str, Any], n_cases: int, lease: LeaseClaim | None = None) -> str:
        """A new run in state 'running', its lease held by `lease` from the same transaction; returns its id
        (UTC start time plus a random suffix)."""
        run_id = _now().strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)
        with self._write() as conn:
            conn.execute(insert(runs).values(
                run_id=run_id, started_at=_now(), status="running", config_name=config_name,
                config_path=config_path, config_text=config_text, device=device,
                fingerprint=environment.get("fingerprint"), environment=_clean(environment),
                harness_rev=environment.get("harness_rev"), schema_version=SCHEMA_VERSION, n_cases=n_cases,
                resumes=0))
            if lease is not None:
                leases.take(conn, run_id, lease)
        return run_id

    def start_resume(self, run_id: str, lease: str | None = None) -> int:
        """Mark `run_id` running again and count the resume; returns the attempt number its new records
        carry (2 for the first resume). With `lease`, only while that token holds the run."""
        with self._write(run_id, lease) as conn:
            conn.execute(update(runs).where(runs.c.run_id == run_id)
                         .values(status="running", ended_at=None, resumes=runs.c.resumes + 1))
            resumes = conn.execute(select(runs.c.resumes).where(runs.c.run_id == run_id)).scalar_one()
        return resumes + 1

    def finish_run(self, run_id: str, status: str, lease: str | None = None) -> None:
        """Mark the run `status` (complete, interrupted); with `lease`, only while that token holds it."""
        with self._write(run_id, lease) as conn:
            conn.execute(update(runs).where(runs.c.run_id == run_id).values(status=status, ended_at=_now()))

    def run(self, run_id: str) -> dict[str, Any]:
        with self.engine.connect() as conn:
            row = conn.execute(select(runs).where(runs.c.run_id == run_id)).mappings().first()
        if row is None:
            raise StoreError(f"no run {run_id!r} in {self.url}")
        return dict(row)

    def runs(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Runs, newest first."""
        q = select(runs).order_by(runs.c.started_at.desc())
        if limit:
            q = q.limit(limit)
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(q).mappings()]

    def latest_run_id(self) -> str:
        rows = self.runs(limit=1)
        if not rows:
            raise StoreError(f"no runs in {self.url} yet: start one with `bakeoff run`")
        return rows[0]["run_id"]

    # records
    def add_record(self, run_id: str, record: CaseRecord | Mapping[str, Any], lease: str | None = None) -> bool:
        """Insert one case's record in one transaction: the model's column fields as columns, the others
        (those measured) in `details`. A mapping is validated as a CaseRecord first (ValidationError for an
        unknown field or a wrong type). With `lease`, only while that token holds the run (else
        leases.LeaseLost, nothing written).

        Returns False, writing nothing, when the run already has a record for this case_id.
        """
        if not isinstance(record, CaseRecord):
            record = CaseRecord.model_validate(record)
        values = record.to_columns()
        row = {k: _clean(values.get(k)) for k in RECORD_COLUMNS if k != "details"}
        details = {k: v for k, v in values.items() if k not in RECORD_COLUMNS and v is not None}
        for key, value in (record.legacy_fields or {}).items():
            details.setdefault(key, value)
        row["details"] = _clean(details)
        try:
            with self._write(run_id, lease) as conn:
                conn.execute(insert(records).values(run_id=run_id, created_at=_now(), **row))
        except IntegrityError:
            if self.has_record(run_id, row["case_id"]):
                return False  # the unique (run_id, case_id) constraint: a duplicate, not a failure
            raise
        return True

    def has_record(self, run_id: str, case_id: str) -> bool:
        with self.engine.connect() as conn:
            return conn.execute(select(records.c.id).where(records.c.run_id == run_id,
                                                           records.c.case_id == case_id)).first() is not None

    def records(self, run_id: str) -> list[dict[str, Any]]:
        """A run's records in insertion order, with `details` kept as a nested dict; fields an older bakeoff
        wrote under another name under their current one (results/renamed_fields.py)."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(records).where(records.c.run_id == run_id).order_by(records.c.id)).mappings()
            return [current_names(r) for r in rows]

    def case_records(self, run_id: str) -> list[StoredRecord]:
        """A run's records in insertion order, typed (fields a different bakeoff wrote: `legacy_fields`)."""
        return [StoredRecord.from_row(r) for r in self.records(run_id)]

    def done_case_ids(self, run_id: str) -> set[str]:
        with self.engine.connect() as conn:
            return set(conn.execute(select(records.c.case_id).where(records.c.run_id == run_id)).scalars())

    def count_records(self, run_id: str) -> int:
        with self.engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(records).where(records.c.run_id == run_id)).scalar_one()

    # the run lease (results/leases.py; harness/run/lease_heartbeat.py decides who is alive)
    def lease_holder(self, run_id: str) -> LeaseHolder | None:
        with self.engine.connect() as conn:
            return leases.holder(conn, run_id)

    def take_lease(self, run_id: str, claim: LeaseClaim, replacing: str | None = None) -> bool:
        """Take the lease of `run_id` if nobody holds it, or from the holder with token `replacing`; False
        when another orchestrator changed it first."""
        with self._write() as conn:
            return leases.take(conn, run_id, claim, replacing)

    def renew_lease(self, run_id: str, token: str) -> bool:
        with self._write() as conn:
            return leases.renew(conn, run_id, token)

    def release_lease(self, run_id: str, token: str) -> None:
        with self._write() as conn:
            leases.release(conn, run_id, token)

    # ceilings
    def add_ceilings(self, fingerprint: str, device: str, values: Iterable[tuple[str, float, str, str]],
                     environment: dict[str, Any]) -> None:
        """Store (name, value, unit, method) ceilings measured now for `fingerprint`."""
        with self._write() as conn:
            for name, value, unit, method in values:
                conn.execute(insert(ceilings).values(fingerprint=fingerprint, device=device, name=name, value=value,
                                                     unit=unit, method=method, measured_at=_now(),
                                                     environment=_clean(environment)))

    def latest_ceilings(self, env: dict[str, Any]) -> dict[str, float]:
        """The newest value of each ceiling measured on the hardware of environment `env` (see
        results.hardware), whatever commit or package versions measured it; {} when none was."""
        if not env:
            return {}
        hw = hardware_id(env)
        with self.engine.connect() as conn:
            rows = conn.execute(select(ceilings.c.name, ceilings.c.value, ceilings.c.environment)
                                .order_by(ceilings.c.measured_at, ceilings.c.id)).mappings()
            return {r["name"]: r["value"] for r in rows
                    if isinstance(r["environment"], dict) and hardware_id(r["environment"]) == hw}


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # SQLAlchemy, not the sqlite3 module, decides where transactions begin (see _sqlite_begin).
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout=60000")  # first: the WAL switch below may itself wait for a lock
    cur.execute("PRAGMA journal_mode=WAL")  # readers (show, report) never block a writer
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


# A transaction left open this long (seconds) belongs to a suspended or hung process: the server ends it, so
# the row locks it holds (a run's lease, harness/run/lease_heartbeat.py) do not outlive it.
IDLE_IN_TRANSACTION_S = 60


def _postgresql_session(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute(f"SET idle_in_transaction_session_timeout = {IDLE_IN_TRANSACTION_S * 1000}")
    cur.close()
    dbapi_conn.commit()  # a SET inside the driver's implicit transaction is undone by its rollback


def _sqlite_begin(conn: Connection) -> None:
    """BEGIN IMMEDIATE (take the write lock now) for schema work, so two processes never both read an old
    schema and then race to change it; a plain deferred BEGIN otherwise."""
    immediate = conn.get_execution_options().get("bakeoff_immediate")
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
