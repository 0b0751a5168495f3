"""The streamed multipart body: what a form parser sees, its length, and that it holds one block."""

from __future__ import annotations

import logging
import tracemalloc
from email.parser import BytesParser
from email.policy import HTTP

import pytest

from airflow_tables.hooks._multipart import MultipartFile


def parse(body: MultipartFile) -> list:
    raw = b"".join(bytes(chunk) for chunk in body)
    assert len(raw) == len(body)  # the Content-Length requests will send
    message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {body.content_type}\r\n\r\n".encode() + raw)
    return list(message.iter_parts())


def test_form_has_fields_then_the_csv_part(tmp_path):
    path = tmp_path / "sales 2024.csv"
    data = b"a,b\r\n1,2\r\n" * 1000
    path.write_bytes(data)
    *fields, file_part = parse(MultipartFile({"ProjectID": "P/1", "CardID": "CRD-x"}, "File", path))
    assert [(p.get_param("name", header="content-disposition"), p.get_content()) for p in fields] == [
        ("ProjectID", "P/1"),
        ("CardID", "CRD-x"),
    ]
    assert file_part.get_param("name", header="content-disposition") == "File"
    assert file_part.get_filename() == "sales 2024.csv"
    assert file_part.get_content_type() == "text/csv"
    assert file_part.get_payload(decode=True) == data


def test_a_name_cannot_break_out_of_its_header(tmp_path):
    path = tmp_path / 'x"; name="ProjectID.csv'
    path.write_bytes(b"a\n1\n")
    (file_part,) = parse(MultipartFile({}, "File", path))
    assert file_part.get_param("name", header="content-disposition") == "File"
    assert file_part.get_filename() == "x%22; name=%22ProjectID.csv"


def test_each_iteration_reads_the_file_again(tmp_path):
    path = tmp_path / "f.csv"
    path.write_bytes(b"a\n1\n")
    body = MultipartFile({}, "File", path)
    first = b"".join(bytes(c) for c in body)
    assert b"".join(bytes(c) for c in body) == first


def test_a_file_that_changes_size_is_not_sent_with_a_wrong_length(tmp_path):
    path = tmp_path / "f.csv"
    path.write_bytes(b"a\n1\n")
    body = MultipartFile({}, "File", path)
    path.write_bytes(b"a\n1\n2\n")
    with pytest.raises(OSError, match="changed size"):
        list(body)


def test_memory_is_the_few_blocks_read_ahead_whatever_the_size(tmp_path, caplog):
    from airflow_tables.sources import FILE_READ_AHEAD

    path = tmp_path / "big.csv"
    block = 1 << 20
    with open(path, "wb") as f:
        for _ in range(40):
            f.write(b"x" * block)
    log = logging.getLogger("t")
    body = MultipartFile({"ProjectID": "P"}, "File", path, block_size=block, logger=log, progress_every=0)
    tracemalloc.start()
    with caplog.at_level(logging.INFO, logger="t"):
        total = sum(len(chunk) for chunk in body)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert total == len(body)
    assert peak < (FILE_READ_AHEAD + 1) * block  # a 40-block file through the read-ahead's blocks, reused
    progress = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Uploaded")]
    assert len(progress) == 10
    assert progress[0].startswith("Uploaded 10% of big.csv")
    assert progress[-1].startswith("Uploaded 100%")


def test_progress_is_written_only_once_its_interval_passed(tmp_path, caplog, monkeypatch):
    """A tenth of the file is reported only once ``progress_every`` seconds passed since the last line.

    An upload that is over in a fraction of a second writes none (the log says it was imported
    and how long it took); a slow one reports a tenth whenever the interval has passed.
    """
    from airflow_tables.hooks import _multipart

    path = tmp_path / "big.csv"
    path.write_bytes(b"x" * (40 << 20))
    log = logging.getLogger("t")

    def progress() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.getMessage().startswith("Uploaded")]

    with caplog.at_level(logging.INFO, logger="t"):
        fast = MultipartFile({"ProjectID": "P"}, "File", path, block_size=1 << 20, logger=log)
        assert sum(len(chunk) for chunk in fast) == len(fast)
    assert progress() == []
    ticks = iter(range(100))  # a slow upload: each look at the clock is a second later
    monkeypatch.setattr(_multipart, "monotonic", lambda: float(next(ticks)))
    with caplog.at_level(logging.INFO, logger="t"):
        slow = MultipartFile({"ProjectID": "P"}, "File", path, block_size=1 << 20, logger=log, progress_every=2.5)
        assert sum(len(chunk) for chunk in slow) == len(slow)
    assert [line.split(" of ")[0] for line in progress()] == ["Uploaded 30%", "Uploaded 60%", "Uploaded 90%"]
    assert all("of big.csv (" in line for line in progress())


def test_requests_sends_it_with_a_content_length_not_chunked(tmp_path):
    import requests

    path = tmp_path / "f.csv"
    path.write_bytes(b"a\n1\n" * 100)
    body = MultipartFile({"ProjectID": "P"}, "File", path)
    prepared = requests.Request("POST", "http://127.0.0.1/", data=body, headers={"Content-Type": body.content_type})
    prepared = prepared.prepare()
    assert prepared.body is body
    assert prepared.headers["Content-Length"] == str(len(body))
    assert "Transfer-Encoding" not in prepared.headers
