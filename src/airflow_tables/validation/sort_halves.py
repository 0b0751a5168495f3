"""Sorting a large file's rows on two processes: its first half here, its second in a child process.

Why: a quarantine reads every record of a file with bad rows on one process, and most of its time
is Python's, a few microseconds for each bad row it judges and writes to the rejects file
(``benchmarks/bad_rows.py``: 1 % bad rows of 512 MiB took 0.43 s to sort on one process, against
0.13 s for the validator's scan on two). The validator splits a large file in two at a record
boundary (:func:`.ranges.split_point`); so does this, and what each half finds is the same as one
read would find:

* the child (``python -m airflow_tables.validation.sort_halves``, its job as JSON on standard
  input, with the line the split is on: this process counts the first half's line breaks while the
  child starts) sorts the second half with a :class:`.bad_rows.RowSorter` made without the header,
  writes its bad rows (with the file's line numbers) to a part of the rejects file of its own, and
  prints what it found (pickled, to its parent only);
* here, the first half is sorted to the split; the child's part of the rejects file is appended to
  the rejects file after this half's rows, and its findings after this half's (:meth:`.Sorted.absorb`).

Measured (``benchmarks/bad_rows.py``, 512 MiB, 1 % bad rows): 0.43 s on one process, 0.29 s on two.
Part of the gain is not the second process: each read now goes into one reused buffer, where a new
1 MiB object for each read was new memory for the kernel to map (55,000 page faults in a process
that had not read before, a third of its system time).

When the split falls inside a record after all (a quoted field with line breaks that looked like
records), or the first half ends the reading (an unterminated quote), or the child fails, the
child's work is thrown away and this process reads on alone: the result never depends on the split.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import subprocess
import sys
import tempfile
from collections import Counter

from airflow_tables.validation import kernels
from airflow_tables.validation.bad_rows import BadRow, RowSorter, Sorted
from airflow_tables.validation.ranges import count_breaks, split_point
from airflow_tables.validation.rejects import RejectsFile, RejectsPart

#: How many lines after a line start must be plain records for the split to be tried there (a split
#: inside a quoted field is still found, below, and read on alone: that costs time, never the result).
PLAIN_RECORDS = 4
#: The child's command line after the interpreter.
CHILD = ("-m", "airflow_tables.validation.sort_halves")


class BadRows:
    """Where a sort's bad rows go as they are found: counted by code, and written to ``rejects`` if there is one.

    ``rejects`` is the rejects file, or in the child its part of it; :meth:`absorb` takes a child's
    whole part at once.
    """

    def __init__(self, rejects: RejectsFile | RejectsPart | None = None) -> None:
        self.rejects = rejects
        self.by_code: Counter[str] = Counter()

    @property
    def writes_rejects(self) -> bool:
        return self.rejects is not None

    def __call__(self, row: BadRow) -> None:
        self.by_code[row.code] += 1
        if self.rejects is not None:
            self.rejects.add(row)

    def absorb(self, part: str | None, by_code: dict[str, int], rows: int) -> None:
        """Take the ``rows`` bad rows a child found, counted ``by_code``, written to ``part`` (when rejects are)."""
        self.by_code.update(by_code)
        if part is not None:
            assert isinstance(self.rejects, RejectsFile), "a part is appended to the rejects file"
            self.rejects.append_part(part, rows)


def sort_rows(sorter: RowSorter, size: int, data_line: int, bad: BadRows) -> Sorted:
    """Sort the records of ``sorter``'s file (``size`` bytes) to its end, on two processes when it is large.

    ``data_line`` is the line of the first record (``sorter.start``); ``bad`` is the sorter's sink.
    """
    start, delimiter, columns = sorter.start, sorter.delimiter, sorter.columns
    mid = None
    if size - start >= kernels.kernel(delimiter, columns).parallel_min_bytes and (os.cpu_count() or 1) > 1:
        mid = split_point(sorter.path, start, size, delimiter, columns, plain_records=PLAIN_RECORDS)
    if mid is None:
        return sorter.run()
    part = None
    if bad.writes_rejects:
        fd, part = tempfile.mkstemp(prefix="airflow-tables-rejects-part-", suffix=".csv")
        os.close(fd)
    child = subprocess.Popen(
        [sys.executable, *CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    with open(sorter.path, "rb") as f:  # while the child starts: its rows carry the file's line numbers
        mid_line = data_line + count_breaks(f, start, mid)
    job = {
        "path": sorter.path,
        "line": mid_line,
        "start": mid,
        "delimiter": delimiter,
        "names": sorter.names,
        "columns": columns,
        "declared_long": sorter.declared_long,
        "typing": sorter.states is not None,
        "part": part,
    }
    try:
        assert child.stdin is not None and child.stdout is not None
        with contextlib.suppress(BrokenPipeError):  # a child that died at once: read on alone, below
            child.stdin.write(json.dumps(job).encode())
            child.stdin.close()
        found = sorter.run(stop=mid)
        if found.stopped is not None:
            return found
        if sorter.pending:  # the split fell inside a record
            return sorter.run()
        out = child.stdout.read()
        if child.wait() != 0:  # out of memory, killed: its half is read here
            return sorter.run()
        later = pickle.loads(out)  # noqa: S301 - our own child's answer, over a pipe only we hold
        found.absorb(later["found"])
        bad.absorb(part, later["by_code"], later["found"].bad_rows)
        if sorter.states is not None and later["states"] is not None:
            sorter.states[:] = bytes(map(max, sorter.states, later["states"]))
        return found
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if part is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(part)


def _child_main() -> int:
    """The child half of :func:`sort_rows`: sort from the split on, write its part of the rejects, print the rest."""
    job = json.loads(sys.stdin.buffer.read())
    part = RejectsPart(job["part"]) if job["part"] else None
    bad = BadRows(part)
    sorter = RowSorter(
        job["path"],
        job["start"],
        job["line"],
        job["delimiter"],
        job["names"],
        job["columns"],
        bad=bad,
        declared_long={int(column): name for column, name in job["declared_long"].items()},
        states=bytearray(job["columns"]) if job["typing"] else None,
        header=False,
    )
    found = sorter.run()
    if part is not None:
        part.close()
    states = bytes(sorter.states) if job["typing"] and sorter.states is not None else None
    sys.stdout.buffer.write(pickle.dumps({"found": found, "by_code": dict(bad.by_code), "states": states}))
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
