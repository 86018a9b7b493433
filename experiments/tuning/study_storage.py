"""Where an Optuna study lives, opening it, and the lock its workers share.

`--storage` takes an RDB URL (`sqlite:///...`, `postgresql://user:pw@host/db`,
`mysql://...`: any SQLAlchemy URL whose driver is installed) or `journal:PATH` (Optuna's
journal file). Without it the study is a SQLite file beside the local MLflow store,
`mlruns/optuna.db`: nothing to install. Workers on several machines share a study by
pointing at one RDB server (PostgreSQL) and one MLflow server.

`lock(url, study)` is held while a worker creates the study or the parent run, asks for the
next trial, or writes the summary: an advisory lock of the PostgreSQL server (released by
the server when a worker dies), a file lock beside a SQLite or journal file. Every storage
keeps its running trials' heartbeats (RDB storages in a table of their own, the journal in
the journal: `journal_heartbeat`), so a killed worker's trial is failed and retried on each.
"""

from __future__ import annotations

import contextlib
import zlib
from pathlib import Path

import optuna
import sqlalchemy
from filelock import FileLock
from sqlalchemy.engine import make_url

from experiments.errors import ConfigError, TrackingUnavailable
from experiments.tracking import store
from experiments.tuning import settings
from experiments.tuning.journal_heartbeat import HeartbeatJournalStorage

DEFAULT_FILE = "optuna.db"
JOURNAL = "journal:"
RDB_DIALECTS = ("sqlite", "postgresql", "mysql")
CONNECT_SECONDS = 10
EXPECTED = (
    "an RDB URL (sqlite:///PATH, postgresql://USER:PASSWORD@HOST:PORT/DB, mysql://...) "
    "or journal:PATH"
)


def default_url() -> str:
    """A SQLite file beside the local MLflow store (or in `mlruns/` for a remote one)."""
    folder = store.local_store_dir(store.tracking_uri())
    folder = folder if folder is not None else store.project_root() / "mlruns"
    return f"sqlite:///{folder / DEFAULT_FILE}"


def check_url(url: str) -> None:
    """A `ConfigError` (exit 2) unless `url` is a storage this module can open."""
    if url.startswith(JOURNAL):
        if not url[len(JOURNAL) :].strip():
            raise ConfigError(f"--storage {url!r}: journal:PATH needs a file path")
        return
    try:
        parsed = make_url(url)
    except sqlalchemy.exc.ArgumentError:
        raise ConfigError(f"--storage {url!r}: not a storage URL; expected {EXPECTED}") from None
    if parsed.get_backend_name() not in RDB_DIALECTS:
        raise ConfigError(
            f"--storage {redact(url)}: unsupported database {parsed.get_backend_name()!r}; "
            f"expected {EXPECTED}"
        )
    try:
        parsed.get_dialect().import_dbapi()
    except sqlalchemy.exc.NoSuchModuleError as err:
        raise ConfigError(f"--storage {redact(url)}: {err}") from None
    except ImportError as err:
        raise ConfigError(
            f"--storage {redact(url)}: its database driver is not installed ({err}); for "
            "PostgreSQL: pip install 'psycopg[binary]'"
        ) from None
    if parsed.get_backend_name() == "sqlite" and not parsed.database:
        raise ConfigError(f"--storage {url!r}: an in-memory SQLite study cannot be shared")


def redact(url: str) -> str:
    """`url` with its password hidden (what is logged and printed)."""
    if url.startswith(JOURNAL):
        return url
    try:
        return make_url(url).render_as_string(hide_password=True)
    except sqlalchemy.exc.ArgumentError:
        return url


def _journal_path(url: str) -> Path:
    return Path(url[len(JOURNAL) :]).expanduser().absolute()


def _sqlite_path(url: str) -> Path | None:
    parsed = make_url(url)
    return Path(parsed.database).absolute() if parsed.get_backend_name() == "sqlite" else None


def _engine_kwargs(url: str) -> dict:
    if _sqlite_path(url) is not None:
        return {"connect_args": {"timeout": 60}}  # writers wait for each other
    return {"connect_args": {"connect_timeout": CONNECT_SECONDS}, "pool_pre_ping": True}


def unreachable(url: str, err: BaseException) -> TrackingUnavailable:
    """The storage did not answer (exit 3), said before any run is created."""
    detail = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return TrackingUnavailable(
        f"the study storage {redact(url)} cannot be reached ({detail}). Start the database, "
        "fix --storage, or leave it out to use mlruns/optuna.db. Nothing was trained or logged."
    )


@contextlib.contextmanager
def lock(url: str, study_name: str):
    """Held by one worker of the study at a time (see the module's docstring)."""
    if url.startswith(JOURNAL) or _sqlite_path(url) is not None:
        path = _journal_path(url) if url.startswith(JOURNAL) else _sqlite_path(url)
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(f"{path}.tune.lock"):  # `PATH.lock` is the journal's own lock
            yield
        return
    parsed = make_url(url)
    engine = sqlalchemy.create_engine(
        parsed, poolclass=sqlalchemy.pool.NullPool, **_engine_kwargs(url)
    )
    key = zlib.crc32(study_name.encode()) - 2**31  # a signed 32-bit key
    try:
        connection = engine.connect()
    except sqlalchemy.exc.SQLAlchemyError as err:
        engine.dispose()
        raise unreachable(url, err) from None
    try:
        if parsed.get_backend_name() == "postgresql":
            connection.execute(sqlalchemy.text("SELECT pg_advisory_lock(:k)"), {"k": key})
            release = sqlalchemy.text("SELECT pg_advisory_unlock(:k)")
        else:  # MySQL
            name = f"optuna-{key}"
            connection.execute(sqlalchemy.text("SELECT GET_LOCK(:n, -1)"), {"n": name})
            release = sqlalchemy.text("SELECT RELEASE_LOCK(:n)")
        try:
            yield
        finally:
            with contextlib.suppress(sqlalchemy.exc.SQLAlchemyError):
                connection.execute(release, {"k": key, "n": f"optuna-{key}"})
    finally:
        connection.close()
        engine.dispose()


def open_storage(url: str, *, heartbeat: int, on_stale=None):
    """The Optuna storage at `url` (tables created when new; call it under `lock`).

    Each running trial's heartbeat is recorded every `heartbeat` seconds; a trial silent for
    `settings.SILENT_BEATS` beats is failed by the next worker that looks, and `on_stale`
    called.
    """
    beats = {
        "heartbeat_interval": heartbeat,
        "grace_period": settings.grace_seconds(heartbeat),
        "heartbeat_stale_trial_callback": on_stale,
    }
    try:
        if url.startswith(JOURNAL):
            path = _journal_path(url)
            path.parent.mkdir(parents=True, exist_ok=True)
            backend = optuna.storages.journal.JournalFileBackend(str(path))
            return HeartbeatJournalStorage(backend, **beats)
        sqlite = _sqlite_path(url)
        if sqlite is not None:
            sqlite.parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.RDBStorage(url, engine_kwargs=_engine_kwargs(url), **beats)
    except (sqlalchemy.exc.SQLAlchemyError, OSError) as err:
        raise unreachable(url, err) from None
