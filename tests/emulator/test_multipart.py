"""The import body parser, fed in every possible way a network may cut it.

The only module tested in-process: how TCP splits a body is not something a
test over real HTTP can choose, and the boundary straddling two chunks is
exactly where a streaming parser goes wrong.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from airflow_tables.emulator.multipart import FormParser, boundary_of

BOUNDARY = b"----b0undary"
SEPARATOR = b"\r\n--" + BOUNDARY


def _body(file_bytes: bytes, project_id: str = "PRJ-1") -> bytes:
    return (
        b"preamble to ignore\r\n"
        b"--"
        + BOUNDARY
        + b'\r\nContent-Disposition: form-data; name="ProjectID"\r\n\r\n'
        + project_id.encode()
        + b"\r\n"
        b"--" + BOUNDARY + b'\r\nContent-Disposition: form-data; name="File"; filename="d.csv"\r\n'
        b"Content-Type: text/csv\r\n\r\n" + file_bytes + b"\r\n"
        b"--" + BOUNDARY + b"--\r\nepilogue"
    )


def _parse(body: bytes, cuts: list[int], path, max_bytes: int = 10**9):
    parser = FormParser(BOUNDARY, file_field="File", file_path=path, max_bytes=max_bytes)
    start = 0
    for cut in sorted(set(cuts)) + [len(body)]:
        parser.feed(body[start:cut])
        start = cut
    return parser.finish()


# Data that looks like the boundary without being it, and the line breaks around it.
_tricky = st.lists(
    st.sampled_from([b"a,b\n", b"\r\n", b"--", b"\r\n--", b"\r\n--" + BOUNDARY[:-1], BOUNDARY, b"-", b"\r", b'"x"']),
    max_size=30,
).map(b"".join)
# ...but never the delimiter itself: a client picks a boundary that is not in its data (RFC 2046).
_tricky = _tricky.filter(lambda data: (data + SEPARATOR).find(SEPARATOR) == len(data))


@given(file_bytes=_tricky, cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_any_chunking_gives_the_same_fields_and_file(tmp_path_factory, file_bytes, cuts):
    path = tmp_path_factory.mktemp("mp") / "f.csv"
    form = _parse(_body(file_bytes), cuts, path)
    assert form.problem is None
    assert form.fields == {"ProjectID": "PRJ-1"}
    assert (form.file.filename, form.file.content_type, form.file.size) == ("d.csv", "text/csv", len(file_bytes))
    assert path.read_bytes() == file_bytes


def test_a_file_over_the_limit_is_counted_not_kept(tmp_path):
    path = tmp_path / "f.csv"
    form = _parse(_body(b"x" * 5000), [100, 2000, 4000], path, max_bytes=1000)
    assert form.file.too_large and form.file.size == 5000
    assert form.file.path is None and not path.exists()


def test_a_body_cut_short_is_a_problem(tmp_path):
    form = _parse(_body(b"a\n1\n")[:-40], [], tmp_path / "f.csv")
    assert "ended before its closing boundary" in form.problem


def test_the_boundary_comes_from_a_multipart_content_type_only():
    assert boundary_of('multipart/form-data; boundary="a b"') == b"a b"
    assert boundary_of("application/json") is None
    assert boundary_of("multipart/form-data") is None
    assert boundary_of(None) is None
