"""Background reading: a table is *being read* after an import and *ready* when this ends.

Each accepted file is read on a thread of its own, so the event loop keeps
answering (the seed's polling rule depends on it). A reading never stays stuck:
it ends ready, or ready with ``SuccessfulUpload`` false and the reason in
``Description``, whatever goes wrong, including an exception of our own. After
a restart, :meth:`Reader.resume` starts again every reading the last process did
not finish, from the file kept in the data directory (the upload itself is never
needed again).

:class:`ReadingControls` holds the test controls that shape a reading: the minimum time
a table stays being read (``processing_delay``, read live so lowering it releases
waiting tables), a number of readings to fail on purpose (``fail_readings``) with the
explanation they give in ``Description`` (``failure_reason``), and a number of rows the
next reading loses (``lose_rows``: it ends well, with ``Rows`` that many short of the file's).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from airflow_tables.emulator.profile import TableProfile, profile_file
from airflow_tables.validation import rules
from airflow_tables.validation.scan import FileScan, scan_file

if TYPE_CHECKING:
    from airflow_tables.emulator.store import Card, Store

log = logging.getLogger("airflow_tables.emulator")
#: What a reading made to fail by ``fail_readings`` says, unless ``failure_reason`` says otherwise.
DEFAULT_FAILURE_REASON = "the test control fail_readings made this reading fail"


class ReadingFailed(Exception):
    """The file cannot become the table's data; the message is the reason users see."""


class ReadingControls:
    """Test controls consulted by readings; safe to change from any thread."""

    def __init__(self, processing_delay: float = 0.0) -> None:
        self._changed = threading.Condition()
        self._initial_delay = processing_delay
        self.processing_delay = processing_delay
        self.fail_readings = 0
        self.failure_reason = DEFAULT_FAILURE_REASON
        self.lose_rows = 0
        # Seed edges the document leaves open, shown on demand:
        self.lock_while_reading = False  # a table being read also reports LockedFromDelete true
        self.replacement_card_id = True  # a replacement's answer repeats the CardID (only implied)

    def as_dict(self) -> dict:
        return {
            "processing_delay": self.processing_delay,
            "fail_readings": self.fail_readings,
            "failure_reason": self.failure_reason,
            "lose_rows": self.lose_rows,
            "lock_while_reading": self.lock_while_reading,
            "replacement_card_id": self.replacement_card_id,
        }

    def update(
        self,
        *,
        processing_delay: float | None = None,
        fail_readings: int | None = None,
        failure_reason: str | None = None,
        lose_rows: int | None = None,
        lock_while_reading: bool | None = None,
        replacement_card_id: bool | None = None,
    ) -> None:
        with self._changed:
            if processing_delay is not None:
                self.processing_delay = processing_delay
            if fail_readings is not None:
                self.fail_readings = fail_readings
            if failure_reason is not None:
                self.failure_reason = failure_reason
            if lose_rows is not None:
                self.lose_rows = lose_rows
            if lock_while_reading is not None:
                self.lock_while_reading = lock_while_reading
            if replacement_card_id is not None:
                self.replacement_card_id = replacement_card_id
            self._changed.notify_all()

    def reset(self) -> None:
        """Back to how the server was started."""
        self.update(
            processing_delay=self._initial_delay,
            fail_readings=0,
            failure_reason=DEFAULT_FAILURE_REASON,
            lose_rows=0,
            lock_while_reading=False,
            replacement_card_id=True,
        )

    def take_failure(self) -> str | None:
        """The explanation of a reading made to fail (one of ``fail_readings`` used up), else ``None``."""
        with self._changed:
            if self.fail_readings > 0:
                self.fail_readings -= 1
                return self.failure_reason
            return None

    def take_lost_rows(self) -> int:
        """How many rows this reading loses (``lose_rows``, used up by the reading that takes it)."""
        with self._changed:
            lost, self.lose_rows = self.lose_rows, 0
            return lost

    def wait_until_due(self, accepted_at: float) -> None:
        """Block until ``processing_delay`` seconds (the current setting) have passed since ``accepted_at``."""
        with self._changed:
            while (remaining := accepted_at + self.processing_delay - time.time()) > 0:
                self._changed.wait(remaining)


class Reader:
    """Starts, runs and resumes readings; the store holds their state, so threads hold nothing durable."""

    def __init__(self, store: Store, controls: ReadingControls, limits: rules.Limits) -> None:
        self.store = store
        self.controls = controls
        self.limits = limits

    def start(self, card: Card, scan: FileScan | None = None) -> None:
        """Read ``card``'s pending file in the background; ``scan`` is the upload check's, when there was one."""
        thread = threading.Thread(target=self.read, args=(card, scan), name=f"reading {card.card_id}", daemon=True)
        thread.start()

    def resume(self) -> int:
        """Start again the readings an earlier process left unfinished; return how many."""
        pending = self.store.pending_readings()
        for card in pending:
            log.info("resuming the reading of %s for table %s", card.pending_name, card.card_id)
            self.start(card)
        return len(pending)

    def read(self, card: Card, scan: FileScan | None = None) -> None:
        """Read the file and end the reading, one way or the other."""
        if card.pending_file is None:  # only a table being read is handed here
            raise ValueError(f"table {card.card_id} has no file being read")
        pending_file = card.pending_file
        name = card.pending_name or "the file"
        profile = TableProfile(card.rows, card.columns, "")  # what a failed reading leaves
        successful = False
        try:
            if (reason := self.controls.take_failure()) is not None:
                raise ReadingFailed(reason)
            profile = profile_file(scan or self._rescan(card), name, self.limits)
            if lost := self.controls.take_lost_rows():  # a reading that quietly drops rows (a test control)
                profile.rows = max(0, profile.rows - lost)
            successful = True
        except ReadingFailed as err:
            profile.description = f"Reading {name} failed: {err}."
        except Exception as err:  # our own bug must not leave the table being read for ever
            log.exception("reading %s for table %s failed", name, card.card_id)
            profile.description = f"Reading {name} failed: the service could not read it ({type(err).__name__})."
        self.controls.wait_until_due(card.accepted_at or 0.0)
        self.store.finish_reading(
            card.card_id,
            pending_file,
            rows=profile.rows,
            columns=profile.columns,
            description=profile.description,
            successful=successful,
        )

    def _rescan(self, card: Card) -> FileScan:
        """Scan the kept file again (a resumed reading has no upload check to start from)."""
        if card.pending_file is None:
            raise ReadingFailed("the table has no file being read")
        path = self.store.path(card.pending_file)
        if not path.is_file():
            raise ReadingFailed("the uploaded file is no longer in the emulator's data directory")
        scan = scan_file(path, self.limits, column_types=True)  # the types are the whole file's (profile.py)
        if scan.errors:
            raise ReadingFailed("; ".join(str(p) for p in scan.errors[:5]))
        return scan
