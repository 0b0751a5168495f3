"""Tables, credits and reading state, kept in SQLite under the data directory.

Why SQLite: every state change the seed describes (a credit spent and a table
created, a reading finished and the data switched) must happen all at once or
not at all, and must survive ``kill -9``. One write-ahead-logged transaction per
change gives both: a committed transaction is in the log before the call
returns, and an interrupted one leaves no trace. Data files live beside the
database (``files/<upload id>.csv``); a file no row points to is an upload that
never finished and is removed at start-up.

Every check that depends on a table's state is made inside the transaction
that changes it, so two requests racing for the same table cannot both win.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from airflow_tables.emulator.config import ConfigError
from airflow_tables.emulator.errors import ApiError

if TYPE_CHECKING:
    from airflow_tables.emulator.config import EmulatorConfig

SCHEMA = """
CREATE TABLE IF NOT EXISTS organisations (
    name TEXT PRIMARY KEY,
    credits INTEGER NOT NULL,
    configured INTEGER NOT NULL          -- the balance last read from the config
);
CREATE TABLE IF NOT EXISTS cards (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- list order: oldest first
    card_id TEXT NOT NULL UNIQUE,
    project_id TEXT NOT NULL,
    name TEXT NOT NULL,
    domain TEXT NOT NULL,
    rows INTEGER NOT NULL DEFAULT 0,
    columns TEXT NOT NULL DEFAULT '[]',  -- JSON list of column records, as served
    description TEXT NOT NULL DEFAULT '',
    processed INTEGER NOT NULL DEFAULT 0,
    successful INTEGER NOT NULL DEFAULT 0,
    completed_at TEXT,                   -- UploadCompletionTime
    connector_source TEXT,
    connector_status TEXT,
    connector_configured TEXT,           -- the status last read from the config
    file TEXT,                           -- the data file of the table as it reads now
    pending_file TEXT,                   -- the file being read, while Processed is false
    pending_name TEXT,                   -- its name as uploaded
    accepted_at REAL                     -- when the pending file was accepted (epoch seconds)
);
CREATE INDEX IF NOT EXISTS cards_by_project ON cards (project_id, seq);
"""


class DataDirInUse(RuntimeError):
    """Another emulator process serves this data directory."""


def _lock(data_dir: Path):
    """Hold an exclusive lock on the data directory for the life of the process.

    Two servers on one directory would each take the other's uploads for orphans.
    The kernel drops the lock when the process dies, even by ``kill -9``.
    """
    handle = open(data_dir / "emulator.lock", "a+")  # noqa: SIM115 - held open for the process's life
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks; one emulator per directory is then up to you
        return handle
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        handle.close()
        raise DataDirInUse(f"another emulator is using the data directory {data_dir}") from err
    return handle


def service_time() -> str:
    """Now, as the seed writes ``UploadCompletionTime``: ``YYYY-MM-DDTHH:MM:SS``, UTC, no offset."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def new_card_id() -> str:
    return f"CRD-{uuid.uuid4()}"


@dataclass(frozen=True)
class Card:
    """One table as stored; :mod:`.api` renders it as the seed's summary or detail."""

    card_id: str
    project_id: str
    name: str
    domain: str
    rows: int
    columns: list
    description: str
    processed: bool
    successful: bool
    completed_at: str | None
    connector_source: str | None
    connector_status: str | None
    pending_file: str | None
    pending_name: str | None
    accepted_at: float | None

    @property
    def locked_from_delete(self) -> bool:
        return self.connector_status == "active"

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Card:
        return cls(
            card_id=row["card_id"],
            project_id=row["project_id"],
            name=row["name"],
            domain=row["domain"],
            rows=row["rows"],
            columns=json.loads(row["columns"]),
            description=row["description"],
            processed=bool(row["processed"]),
            successful=bool(row["successful"]),
            completed_at=row["completed_at"],
            connector_source=row["connector_source"],
            connector_status=row["connector_status"],
            pending_file=row["pending_file"],
            pending_name=row["pending_name"],
            accepted_at=row["accepted_at"],
        )


class Store:
    """The emulator's persistent state; safe to call from the event loop and reading threads."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self.files_dir = self.data_dir / "files"
        self.files_dir.mkdir(parents=True, exist_ok=True)
        self._dir_lock = _lock(self.data_dir)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(self.data_dir / "emulator.sqlite3", isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        # NORMAL: a commit is in the log before it returns; a killed process loses nothing,
        # only a power cut could lose the last commits, which an emulator can afford.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def path(self, relative: str) -> Path:
        return self.data_dir / relative

    def new_upload_path(self) -> tuple[str, Path]:
        """A fresh file to stream an upload into: (relative name to store, absolute path)."""
        relative = f"files/{uuid.uuid4().hex}.csv"
        return relative, self.path(relative)

    # -- configuration ------------------------------------------------------------------

    def sync_config(self, config: EmulatorConfig, connector_columns) -> None:
        """Bring organisations and connector tables in line with the configuration.

        A balance or connector status is (re)set only when the configured value is new
        or changed, so credits spent and statuses switched survive a plain restart.
        ``connector_columns(connector)`` gives a connector table's column records.
        """
        with self._tx() as db:
            for name, credits in config.organisations.items():
                row = db.execute("SELECT configured FROM organisations WHERE name = ?", (name,)).fetchone()
                if row is None:
                    db.execute("INSERT INTO organisations VALUES (?, ?, ?)", (name, credits, credits))
                elif row["configured"] != credits:
                    db.execute(
                        "UPDATE organisations SET credits = ?, configured = ? WHERE name = ?", (credits, credits, name)
                    )
            for con in config.connectors:
                row = db.execute(
                    "SELECT connector_source, connector_configured FROM cards WHERE card_id = ?", (con.card_id,)
                ).fetchone()
                if row is not None and row["connector_source"] is None:
                    raise ConfigError(f"connector card_id {con.card_id} is already the id of an uploaded table")
                if row is None:
                    db.execute(
                        "INSERT INTO cards (card_id, project_id, name, domain, rows, columns, description,"
                        " processed, successful, completed_at, connector_source, connector_status,"
                        " connector_configured) VALUES (?, ?, ?, ?, ?, ?, ?, 1, 1, ?, ?, ?, ?)",
                        (
                            con.card_id,
                            con.project_id,
                            con.name,
                            con.domain,
                            con.rows,
                            json.dumps(connector_columns(con)),
                            f"Table kept up to date by the connection to {con.source}: "
                            f"{con.rows:,} rows, {len(con.columns)} columns.",
                            service_time(),
                            con.source,
                            con.status,
                            con.status,
                        ),
                    )
                elif row["connector_configured"] != con.status:
                    db.execute(
                        "UPDATE cards SET connector_status = ?, connector_configured = ? WHERE card_id = ?",
                        (con.status, con.status, con.card_id),
                    )

    # -- reading ------------------------------------------------------------------------

    def list_cards(self, project_id: str) -> list[Card]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM cards WHERE project_id = ? ORDER BY seq", (project_id,))
            return [Card.from_row(r) for r in rows.fetchall()]

    def get_card(self, project_id: str, card_id: str) -> Card:
        with self._lock:
            return self._get(self._db, project_id, card_id)

    @staticmethod
    def _get(db: sqlite3.Connection, project_id: str, card_id: str) -> Card:
        row = db.execute("SELECT * FROM cards WHERE card_id = ? AND project_id = ?", (card_id, project_id)).fetchone()
        if row is None:
            raise ApiError(404, f"there is no table {card_id} in department {project_id}")
        return Card.from_row(row)

    def credits(self) -> dict[str, int]:
        with self._lock:
            return {r["name"]: r["credits"] for r in self._db.execute("SELECT name, credits FROM organisations")}

    # -- import -------------------------------------------------------------------------

    def check_import(self, organisation: str, project_id: str, card_id: str | None) -> None:
        """Refuse early what :meth:`accept_import` would refuse, before the file is scanned."""
        with self._lock:
            self._check_import(self._db, organisation, project_id, card_id)

    def _check_import(self, db: sqlite3.Connection, organisation: str, project_id: str, card_id: str | None) -> None:
        if card_id is not None:
            card = self._get(db, project_id, card_id)
            if card.connector_source is not None:
                raise ApiError(
                    409,
                    f"table {card_id} comes from the connected system {card.connector_source}; its data comes "
                    "from that connection and cannot be replaced by an upload",
                )
            if not card.processed:
                raise ApiError(
                    409,
                    f"table {card_id} is still being read for an earlier file (Processed is false); "
                    "wait until Processed is true and import again",
                )
        row = db.execute("SELECT credits FROM organisations WHERE name = ?", (organisation,)).fetchone()
        if row is None or row["credits"] <= 0:
            raise ApiError(
                402, f"organisation {organisation!r} has no credit left (each import uses one); nothing was imported"
            )

    def accept_import(
        self,
        organisation: str,
        project_id: str,
        card_id: str | None,
        *,
        name: str,
        domain: str,
        file: str,
        file_name: str,
    ) -> Card:
        """Spend one credit and start reading ``file``, as a new table or a replacement; all or nothing."""
        with self._tx() as db:
            self._check_import(db, organisation, project_id, card_id)
            db.execute("UPDATE organisations SET credits = credits - 1 WHERE name = ?", (organisation,))
            now = time.time()
            if card_id is None:
                card_id = new_card_id()
                db.execute(
                    "INSERT INTO cards (card_id, project_id, name, domain, description, processed, successful,"
                    " pending_file, pending_name, accepted_at) VALUES (?, ?, ?, ?, ?, 0, 0, ?, ?, ?)",
                    (card_id, project_id, name, domain, f"The file {file_name} is being read.", file, file_name, now),
                )
            else:
                db.execute(
                    "UPDATE cards SET processed = 0, successful = 0, pending_file = ?, pending_name = ?,"
                    " accepted_at = ? WHERE card_id = ?",
                    (file, file_name, now, card_id),
                )
            return self._get(db, project_id, card_id)

    def finish_reading(
        self, card_id: str, file: str, *, rows: int, columns: list, description: str, successful: bool
    ) -> Card | None:
        """End the reading of ``file``: switch the table's data to it, or keep the old data on failure.

        Returns the card as it now is, or None when the table no longer waits for
        this file (a stale job). The file the table no longer uses is removed.
        """
        with self._tx() as db:
            row = db.execute("SELECT * FROM cards WHERE card_id = ?", (card_id,)).fetchone()
            if row is None or row["pending_file"] != file:
                return None
            if successful:
                old = row["file"]
                db.execute(
                    "UPDATE cards SET rows = ?, columns = ?, description = ?, file = ?, processed = 1,"
                    " successful = 1, completed_at = ?, pending_file = NULL, pending_name = NULL,"
                    " accepted_at = NULL WHERE card_id = ?",
                    (rows, json.dumps(columns), description, file, service_time(), card_id),
                )
            else:
                old = file  # the table keeps the data it had; the refused file goes
                db.execute(
                    "UPDATE cards SET description = ?, processed = 1, successful = 0, completed_at = ?,"
                    " pending_file = NULL, pending_name = NULL, accepted_at = NULL WHERE card_id = ?",
                    (description, service_time(), card_id),
                )
            card = Card.from_row(db.execute("SELECT * FROM cards WHERE card_id = ?", (card_id,)).fetchone())
        if old:
            self._remove(old)
        return card

    def pending_readings(self) -> list[Card]:
        """Tables whose reading had not ended when the process last stopped."""
        with self._lock:
            rows = self._db.execute("SELECT * FROM cards WHERE processed = 0 ORDER BY seq").fetchall()
            return [Card.from_row(r) for r in rows]

    # -- delete and controls ------------------------------------------------------------

    def delete_card(self, project_id: str, card_id: str) -> None:
        """Remove a table and its data, unless it is being read or locked (409)."""
        with self._tx() as db:
            card = self._get(db, project_id, card_id)
            if not card.processed:
                raise ApiError(
                    409,
                    f"table {card_id} is still being read (Processed is false); "
                    "wait until Processed is true and delete again",
                )
            if card.locked_from_delete:
                raise ApiError(
                    409,
                    f"table {card_id} is locked from delete (LockedFromDelete is true): it is fed by the active "
                    f"connection to {card.connector_source}; pause the connection first",
                )
            row = db.execute("SELECT file FROM cards WHERE card_id = ?", (card_id,)).fetchone()
            db.execute("DELETE FROM cards WHERE card_id = ?", (card_id,))
        if row["file"]:
            self._remove(row["file"])

    def set_connector_status(self, card_id: str, status: str) -> Card:
        with self._tx() as db:
            row = db.execute("SELECT * FROM cards WHERE card_id = ?", (card_id,)).fetchone()
            if row is None or row["connector_source"] is None:
                raise ApiError(404, f"there is no connector table {card_id}")
            db.execute("UPDATE cards SET connector_status = ? WHERE card_id = ?", (status, card_id))
            return Card.from_row(db.execute("SELECT * FROM cards WHERE card_id = ?", (card_id,)).fetchone())

    def remove_orphan_files(self) -> int:
        """Delete data files no table points to (uploads cut short, removals interrupted)."""
        with self._lock:
            used: set[str] = set()
            for row in self._db.execute("SELECT file, pending_file FROM cards"):
                used.update(f for f in (row["file"], row["pending_file"]) if f)
        removed = 0
        for entry in os.scandir(self.files_dir):
            if f"files/{entry.name}" not in used:
                self._remove(f"files/{entry.name}")
                removed += 1
        return removed

    def _remove(self, relative: str) -> None:
        self.path(relative).unlink(missing_ok=True)
