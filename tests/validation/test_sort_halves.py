"""The bad-row sorter on two processes (``validation/sort_halves.py``): it finds what one process finds.

A file of the kernels' parallel size or more is sorted in two halves, the second by a real child
process (``python -m airflow_tables.validation.sort_halves``). Here that size is made 1 KiB, so
that files of a few hundred KiB are split; each test holds the outcome to the generator's own
answer (``test_bad_rows.py``'s builder and ``assert_sorted_as_built``: the good rows byte for byte,
each bad row once with its line, offset and code), and checks which way the sort went: split and
joined (the first half read to the split, once), or read on alone (the split fell inside a record,
the child died).
"""

from __future__ import annotations

import os

import pytest
from tests.validation.test_bad_rows import (
    BAD_KINDS,
    DECLARED,
    NAMES,
    CsvBuilder,
    assert_sorted_as_built,
    bad_code_and_column,
    good_row,
    make_bad,
    quarantine,
)

from airflow_tables.validation import kernels, sort_halves
from airflow_tables.validation.bad_rows import RowSorter
from airflow_tables.validation.row_policy import BadRowPolicy


@pytest.fixture
def reads(monkeypatch):
    """Files of 1 KiB or more are split; returns the ``stop`` of each :meth:`RowSorter.run` call, in order."""
    monkeypatch.setattr(kernels.NativeKernel, "parallel_min_bytes", 1024)
    monkeypatch.setattr(kernels.PythonKernel, "parallel_min_bytes", 1024)
    calls: list[int | None] = []
    run = RowSorter.run

    def recorded(self, stop=None):
        calls.append(stop)
        return run(self, stop)

    monkeypatch.setattr(RowSorter, "run", recorded)
    return calls


def dense_file(eol: bytes, rows: int = 6000, every: int = 7) -> CsvBuilder:
    """Good rows (every fifth with a quoted separator and line break) with a bad row of each kind in turn."""
    builder = CsvBuilder(",", eol, NAMES, DECLARED)
    for i in range(rows):
        if i % every == every - 1:
            kind = BAD_KINDS[(i // every) % len(BAD_KINDS)]
            builder.record(make_bad(kind), *bad_code_and_column(kind))
        else:
            builder.record(good_row(i, eol))
    return builder


def split_then_joined(reads: list[int | None], size: int) -> bool:
    """The sort read the first half to a split near the middle, and no further: the child's half was used."""
    return len(reads) == 1 and reads[0] is not None and size // 3 < reads[0] < 2 * size // 3


@pytest.mark.parametrize("eol", [b"\n", b"\r\n"], ids=["lf", "crlf"])
def test_a_split_file_is_sorted_as_one_process_sorts_it(eol, reads, tmp_path, private_tmp):
    """Every kind of bad row on both sides of the split: the good rows, the rejects and their lines are the file's."""
    built = dense_file(eol).build()
    folder = tmp_path / "in"
    folder.mkdir()
    got = assert_sorted_as_built(built, built.write(folder))
    assert split_then_joined(reads, len(built.data)), reads
    halves = {row.offset < reads[0] for row in built.bad}
    assert halves == {True, False}  # bad rows in both halves: the child's part of the rejects was appended
    assert got.aside.bad_rows == len(built.bad) > 800
    assert os.listdir(private_tmp) == []  # the child's part of the rejects is gone


def test_a_split_inside_a_quoted_field_is_read_on_alone(reads, tmp_path, monkeypatch):
    """A split that looked like a record boundary but was inside a quoted line break: the child's half is dropped."""
    built = dense_file(b"\n").build()
    inside = built.data.index(b'"a,b\nc', len(built.data) // 2) + len(b'"a,b\n')  # a line start inside quotes
    monkeypatch.setattr(sort_halves, "split_point", lambda *args, **kwargs: inside)
    assert_sorted_as_built(built, built.write(tmp_path))
    assert reads == [inside, None]


def test_a_child_that_dies_leaves_its_half_to_this_process(reads, tmp_path, monkeypatch, private_tmp):
    """The child killed or out of memory (here: it exits at once): this process sorts the rest, nothing is lost."""
    monkeypatch.setattr(sort_halves, "CHILD", ("-c", "import sys; sys.exit(9)"))
    built = dense_file(b"\n").build()
    folder = tmp_path / "in"
    folder.mkdir()
    assert_sorted_as_built(built, built.write(folder))
    assert len(reads) == 2 and reads[0] is not None and reads[1] is None
    assert os.listdir(private_tmp) == []


@pytest.mark.parametrize("half", ["first", "second"])
def test_a_quote_never_closed_in_either_half_refuses_the_file(half, reads, tmp_path, private_tmp):
    """What ends the reading ends it in either half: refused with its line, no row set aside, nothing left behind."""
    builder = dense_file(b"\n", rows=400 if half == "first" else 4000)
    builder.record([b"1", b'"never closed', b"n", b"2"])
    tail = b"".join(b"%d,name,note %d,%d\n" % (i, i, i) for i in range(4000 if half == "first" else 400))
    data = builder.build().data + tail  # no quote after the open one: it swallows the rest of the file
    folder = tmp_path / "in"
    folder.mkdir()
    path = folder / "data.csv"
    path.write_bytes(data)
    got = quarantine(path, DECLARED)
    (problem,) = [p for p in got.aside.report.errors if p.code == "unterminated-quote"]
    assert problem.line == data[: data.index(b'"never closed')].count(b"\n") + 1
    assert got.aside.bad_rows == 0 and got.aside.rejects is None
    assert os.listdir(folder) == ["data.csv"] and os.listdir(private_tmp) == []
    assert reads[0] is not None
    assert (reads[0] > data.index(b'"never closed')) == (half == "first")


def test_column_types_are_folded_across_the_halves(reads, tmp_path):
    """A column whose good rows are whole numbers in the first half and text in the second is typed ``string``."""
    builder = CsvBuilder(",", b"\n", ["id", "code", "amount"])
    for i in range(8000):
        code = str(i).encode() if i < 6000 else b"X-" + str(i).encode()
        builder.record(
            [str(i).encode(), code, b"5"] + ([b"extra"] if i % 9 == 8 else []),
            *(("field-count", None) if i % 9 == 8 else (None, None)),
        )
    built = builder.build()
    got = quarantine(built.write(tmp_path), column_types=True)
    assert split_then_joined(reads, len(built.data)), reads
    assert got.aside.report.column_types == ["long", "string", "long"]


def test_fail_lists_the_first_bad_rows_of_both_halves_and_counts_them_all(reads, tmp_path):
    """``on_bad_rows="fail"``: the refusal lists ten bad rows, the first half's first, and says how many in all."""
    builder = CsvBuilder(",", b"\n", NAMES)
    bad_at = {100, 200, 300} | set(range(5000, 5100, 5))
    for i in range(6000):
        if i in bad_at:
            builder.record(make_bad("many"), "field-count")
        else:
            builder.record(good_row(i, b"\n"))
    built = builder.build()
    got = quarantine(built.write(tmp_path), policy=BadRowPolicy("fail"))
    assert split_then_joined(reads, len(built.data)), reads
    (problem,) = got.aside.report.errors
    lines = [row.line for row in built.bad]
    assert len(lines) == 23 and sum(row.offset < reads[0] for row in built.bad) == 3
    assert f"and {23 - 10} more" in problem.message
    for line in lines[:10]:
        assert f"line {line:,} " in problem.message
    assert f"line {lines[10]:,} " not in problem.message
    assert got.aside.rejects is None


def test_a_last_record_cut_short_is_seen_in_the_second_half(reads, tmp_path):
    """The file's last record with too few fields (what a writer leaves) is ``cut_short``, as one process says."""
    built = dense_file(b"\n", rows=4000, every=1000).build()
    path = built.write(tmp_path)
    with open(path, "ab") as f:
        f.write(b"9999,cut")
    got = quarantine(path, DECLARED)
    assert split_then_joined(reads, path.stat().st_size), reads
    cut = got.aside.cut_short
    assert cut is not None and (cut.byte_offset, cut.record) == (len(built.data), b"9999,cut")
