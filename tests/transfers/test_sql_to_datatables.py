"""SqlToDataTablesOperator through real DAG runs: a real PostgreSQL and SQLite into the emulator.

What the service receives is read back from the emulator byte for byte (``received_bytes``), so
each value rule of docs/transfers.md is checked on the wire; every refusal is checked to have
sent nothing (no import accepted, no credit spent).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from tests.operators._runs import imports_since, state, xcom
from tests.transfers.conftest import PG_CONN_ID

TASK = "transfer"


def run(transfer_dags, dag_id: str, **params):
    when = datetime.now(UTC)
    return transfer_dags.DAGS[dag_id].test(run_conf=params, logical_date=when, run_after=when)


def logged(caplog, capfd) -> str:
    return caplog.text + "".join(capfd.readouterr())


@pytest.fixture
def stats(datatables_conn):
    datatables_conn.reset_stats()
    return {"imports_accepted": datatables_conn.stats()["imports_accepted"], "credits": datatables_conn.credits()}


def nothing_sent(emulator, stats) -> bool:
    return imports_since(emulator, stats) == 0 and emulator.credits() == stats["credits"]


# -- values: every column kind PostgreSQL returns, and SQLite's ----------------------------------------------

PG_KINDS = """
CREATE TABLE {t} (
    id int4, i2 int2, i8 int8, num numeric(12, 4), free numeric, f4 float4, f8 float8, ok bool,
    txt text, vc varchar(20), ch char(3), d date, tm time, ts timestamp, tstz timestamptz, u uuid, j json, jb jsonb
);
INSERT INTO {t} VALUES
 (1, -32768, 9223372036854775807, 1234.56, 0.10, 0.1, 0.1, true, 'plain, with comma', 'semi;colon', 'abc',
  '2026-11-29', '12:30:00.25', '2026-11-29 12:30:00', '2026-11-29 13:30:00+01',
  'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{{"a": [1, 2]}}', '{{"b": 1}}'),
 (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
 (3, 0, 0, -1, 12345678901234567890.123, 'Infinity', 1e20, false, 'say "hi"', '', 'x',
  '0001-01-01', '00:00:00', '2000-01-01 00:00:00.5', '2000-01-01 00:00:00+00',
  '00000000-0000-0000-0000-000000000000', 'null', '[]'),
 (4, 7, -1, 0.0001, -0, 1.5, 'NaN', true, 'line one
line two', 'tab	in', 'a|b', '9999-12-31', '23:59:59.999999', '1970-01-01 00:00:00', '1969-12-31 19:00:00-05',
  NULL, '"text"', '{{"nested": {{"x": null}}}}');
"""
PG_KINDS_CSV = (
    "id,i2,i8,num,free,f4,f8,ok,txt,vc,ch,d,tm,ts,tstz,u,j,jb\n"
    '1,-32768,9223372036854775807,1234.5600,0.10,0.1,0.1,true,"plain, with comma","semi;colon",abc,2026-11-29,'
    "12:30:00.250000,2026-11-29T12:30:00,2026-11-29T12:30:00+00:00,a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,"
    '"{""a"": [1, 2]}","{""b"": 1}"\n'
    "2,,,,,,,,,,,,,,,,,\n"
    # char(3) is padded by PostgreSQL itself ("x  "): text is as the database writes it.
    '3,0,0,-1.0000,12345678901234567890.123,inf,1e+20,false,"say ""hi""",,x  ,0001-01-01,00:00:00.000000,'
    "2000-01-01T00:00:00.500000,2000-01-01T00:00:00+00:00,00000000-0000-0000-0000-000000000000,null,[]\n"
    '4,7,-1,0.0001,0,1.5,nan,true,"line one\nline two","tab\tin","a|b",9999-12-31,23:59:59.999999,'
    '1970-01-01T00:00:00,1970-01-01T00:00:00+00:00,,"""text""","{""nested"": {""x"": null}}"\n'
)


def test_every_postgres_column_kind_is_written_by_the_rules(pg, transfer_dags, datatables_conn, stats):
    table = pg.table()
    pg.run(PG_KINDS.format(t=table))

    dag_run = run(transfer_dags, "sql_pg_fail", sql=f"SELECT * FROM {table} ORDER BY id", table_name=table)

    assert state(dag_run, TASK) == "success"
    card_id = xcom(dag_run, TASK)
    assert datatables_conn.received_bytes(card_id).decode() == PG_KINDS_CSV
    made = {c["CardID"]: c for c in datatables_conn.list_cards()}[card_id]
    assert made["CardName"] == table and made["Rows"] == 4
    assert imports_since(datatables_conn, stats) == 1


def test_postgres_columns_without_a_csv_form_are_refused_by_name(
    pg, transfer_dags, datatables_conn, stats, caplog, capfd
):
    sql = "SELECT 1 AS id, '\\x00ff'::bytea AS raw, ARRAY[1, 2] AS tags, interval '1 day' AS waited"
    with caplog.at_level(logging.INFO):
        dag_run = run(transfer_dags, "sql_pg_fail", sql=sql, table_name="refused_kinds")

    assert state(dag_run, TASK) == "failed"
    said = logged(caplog, capfd)
    assert "raw (bytea), tags (integer[]), waited (interval)" in said and "cast them to text" in said
    assert nothing_sent(datatables_conn, stats)


def test_a_row_whose_only_column_is_null_is_a_row(pg, transfer_dags, datatables_conn):
    """PostgreSQL writes such a row as an empty line, which a CSV reader skips: it must be read, and sent, as a row.

    Sent as ``""``, as the Parquet conversion writes a one-column row of nothing: an empty line is no row.
    """
    sql = "SELECT v AS a FROM (VALUES (1), (NULL), (3), (NULL)) AS t(v)"
    dag_run = run(transfer_dags, "sql_pg_import", sql=sql, table_name="lone_nulls")

    assert state(dag_run, TASK) == "success"
    assert datatables_conn.received_bytes(xcom(dag_run, TASK)).decode() == 'a\n1\n""\n3\n""\n'
    text = "SELECT v AS a FROM (VALUES ('\\N'), (NULL), ('')) AS t(v)"  # the marker's bytes as text stay text
    dag_run = run(transfer_dags, "sql_pg_import", sql=text, table_name="marker_text")
    assert datatables_conn.received_bytes(xcom(dag_run, TASK)).decode() == 'a\n\\N\n""\n""\n'


def test_parameters_are_bound_by_the_driver(pg, transfer_dags, datatables_conn):
    dag_run = run(transfer_dags, "sql_pg_parameters", word="it's; 'quoted'", table_name="bound")

    assert state(dag_run, TASK) == "success"
    sent = datatables_conn.received_bytes(xcom(dag_run, TASK)).decode()
    assert sent == "n,word\n" + "".join(f"{n},\"it's; 'quoted'\"\n" for n in (1, 2, 3))


def test_sqlite_values_and_nulls(sqlite_db, transfer_dags, datatables_conn, stats):
    sqlite_db.executescript(
        """
        CREATE TABLE orders (id INTEGER, amount REAL, region TEXT, paid BOOLEAN, note TEXT);
        INSERT INTO orders VALUES (1, 0.1, 'North', 1, 'a, b'), (2, NULL, NULL, NULL, NULL), (3, 1e20, 'So;uth', 0, '');
        """
    )
    dag_run = run(transfer_dags, "sql_sqlite_fail", sql="SELECT * FROM orders ORDER BY id")

    assert state(dag_run, TASK) == "success"
    card_id = xcom(dag_run, TASK)
    # SQLite has no booleans: its 1 and 0 are whole numbers, written as such.
    expected = 'id,amount,region,paid,note\n1,0.1,North,1,"a, b"\n2,,,,\n3,1e+20,"So;uth",0,\n'
    assert datatables_conn.received_bytes(card_id).decode() == expected
    made = {c["CardID"]: c for c in datatables_conn.list_cards()}[card_id]
    assert made["CardName"] == TASK  # no table_name: the task's id names the table
    assert imports_since(datatables_conn, stats) == 1


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ("(1, x'00ff')", "payload (binary)"),
        ("(1, 'text'), (2, 3)", "column 'payload' holds values of int and str"),
    ],
)
def test_sqlite_bytes_and_mixed_kinds_are_refused_by_name(
    sqlite_db, transfer_dags, datatables_conn, stats, caplog, capfd, values, says
):
    sqlite_db.executescript(f"CREATE TABLE blobs (id INTEGER, payload); INSERT INTO blobs VALUES {values};")
    with caplog.at_level(logging.INFO):
        dag_run = run(transfer_dags, "sql_sqlite_fail", sql="SELECT id, payload FROM blobs")

    assert state(dag_run, TASK) == "failed"
    assert says in logged(caplog, capfd)
    assert nothing_sent(datatables_conn, stats)


# -- limits --------------------------------------------------------------------------------------------------


def _wide(columns: int) -> str:
    return "SELECT " + ", ".join(f"{n} AS c{n}" for n in range(1, columns + 1))


def test_a_300_column_result_is_imported(pg, transfer_dags, datatables_conn):
    dag_run = run(transfer_dags, "sql_pg_fail", sql=_wide(300), table_name="wide_300")

    assert state(dag_run, TASK) == "success"
    sent = datatables_conn.received_bytes(xcom(dag_run, TASK)).decode().splitlines()
    assert len(sent) == 2 and len(sent[0].split(",")) == 300 and sent[1].split(",")[-1] == "300"


def test_a_301_column_result_is_refused_before_any_row(pg, transfer_dags, datatables_conn, stats, caplog, capfd):
    with caplog.at_level(logging.INFO):
        dag_run = run(transfer_dags, "sql_pg_fail", sql=_wide(301), table_name="wide_301")

    assert state(dag_run, TASK) == "failed"
    assert "it has 301 columns; the service takes at most 300" in logged(caplog, capfd)
    assert nothing_sent(datatables_conn, stats)


@pytest.mark.parametrize("dag_id", ["sql_pg_fail", "sql_sqlite_fail"])
def test_a_result_past_the_size_limit_stops_there(
    pg, sqlite_db, transfer_dags, datatables_conn, stats, caplog, capfd, monkeypatch, dag_id
):
    """The limit is lowered to 200 kB (a real 512 MB result would take most of a minute to write)."""
    import airflow_tables.sources.query as query

    monkeypatch.setattr(query, "MAX_BYTES", 200_000)
    monkeypatch.setattr(query, "BLOCK_BYTES", 16 * 1024)
    monkeypatch.setattr(query, "BLOCK_ROWS", 512)
    if dag_id == "sql_sqlite_fail":
        sqlite_db.executescript(
            "CREATE TABLE big AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000) "
            "SELECT i, hex(randomblob(16)) AS h FROM n;"
        )
        sql = "SELECT i, h FROM big"
    else:
        sql = "SELECT n, md5(n::text) AS h FROM generate_series(1, 100000) AS n"
    with caplog.at_level(logging.INFO):
        dag_run = run(transfer_dags, dag_id, sql=sql, table_name="too_large")

    assert state(dag_run, TASK) == "failed"
    said = logged(caplog, capfd)
    assert "its result passed the service's limit of 200,000 bytes after " in said
    rows = int(said.split("bytes after ", 1)[1].split(" rows", 1)[0].replace(",", ""))
    assert 0 < rows < 100_000
    assert nothing_sent(datatables_conn, stats)


# -- if_empty ------------------------------------------------------------------------------------------------

EMPTY = "SELECT n, n * 2 AS doubled FROM generate_series(1, 0) AS n"


def test_an_empty_result_fails_by_default(pg, transfer_dags, datatables_conn, stats, caplog, capfd):
    with caplog.at_level(logging.INFO):
        dag_run = run(transfer_dags, "sql_pg_fail", sql=EMPTY, table_name="empty")

    assert state(dag_run, TASK) == "failed"
    assert "returned no rows; nothing was sent" in logged(caplog, capfd)
    assert nothing_sent(datatables_conn, stats)


def test_an_empty_result_skips(pg, sqlite_db, transfer_dags, datatables_conn, stats):
    sqlite_db.executescript("CREATE TABLE no_rows (id INTEGER);")
    for dag_id, sql in (("sql_pg_skip", EMPTY), ("sql_sqlite_skip", "SELECT id FROM no_rows")):
        dag_run = run(transfer_dags, dag_id, sql=sql, table_name="empty")
        assert state(dag_run, TASK) == "skipped"
    assert nothing_sent(datatables_conn, stats)


def test_an_empty_result_imports_the_header_alone(pg, transfer_dags, datatables_conn, stats):
    dag_run = run(transfer_dags, "sql_pg_import", sql=EMPTY, table_name="empty_table")

    assert state(dag_run, TASK) == "success"
    card_id = xcom(dag_run, TASK)
    assert datatables_conn.received_bytes(card_id) == b"n,doubled\n"
    assert {c["CardID"]: c for c in datatables_conn.list_cards()}[card_id]["Rows"] == 0
    assert imports_since(datatables_conn, stats) == 1


# -- the import path's guarantees ----------------------------------------------------------------------------


def test_a_replace_without_a_column_is_stopped_by_the_schema_guard(pg, transfer_dags, datatables_conn, caplog, capfd):
    table = pg.table()
    pg.run(f"CREATE TABLE {table} AS SELECT n AS id, 'r' || n AS region, n * 10 AS amount FROM generate_series(1, 5) n")
    first = run(transfer_dags, "sql_pg_fail", sql=f"SELECT id, region, amount FROM {table}", table_name=table)
    card_id = xcom(first, TASK)
    datatables_conn.wait_until_processed(datatables_conn.project_id, card_id)
    datatables_conn.reset_stats()
    before = {"imports_accepted": datatables_conn.stats()["imports_accepted"], "credits": datatables_conn.credits()}

    with caplog.at_level(logging.INFO):
        dag_run = run(transfer_dags, "sql_pg_replace", sql=f"SELECT id, region FROM {table}", card_id=card_id)

    assert state(dag_run, TASK) == "failed"
    assert "amount" in logged(caplog, capfd)
    assert nothing_sent(datatables_conn, before)
    assert datatables_conn.received_bytes(card_id).decode().splitlines()[0] == "id,region,amount"


def test_a_retry_after_a_lost_answer_adopts_the_table_once(pg, transfer_dags, datatables_conn, stats):
    table = pg.table()
    pg.run(f"CREATE TABLE {table} AS SELECT n AS id, md5(n::text) AS h FROM generate_series(1, 50) n")
    datatables_conn.set_processing_delay(0.3)
    datatables_conn.set_faults([{"methods": ["POST"], "path": "/data/import", "drop": "after", "times": 1}])

    dag_run = run(transfer_dags, "sql_pg_retry", sql=f"SELECT * FROM {table} ORDER BY id", table_name=table)

    ti = dag_run.get_task_instance(TASK)
    assert str(ti.state) == "success" and ti.try_number == 2
    assert imports_since(datatables_conn, stats) == 1
    assert stats["credits"] - datatables_conn.credits() == 1
    named = [c["CardID"] for c in datatables_conn.list_cards() if c["CardName"] == table]
    assert named == [xcom(dag_run, TASK)]


def test_a_query_error_costs_nothing_and_is_in_the_log(pg, transfer_dags, datatables_conn, stats, caplog, capfd):
    with caplog.at_level(logging.INFO):
        dag_run = run(transfer_dags, "sql_pg_fail", sql="SELECT id FROM no_such_table", table_name="broken")

    assert state(dag_run, TASK) == "failed"
    assert 'relation "no_such_table" does not exist' in logged(caplog, capfd)
    assert nothing_sent(datatables_conn, stats)


# -- connections that cannot run a query ---------------------------------------------------------------------


def test_a_connection_without_a_dbapi_hook_is_refused(transfer_dags, datatables_conn, stats, caplog, capfd):
    with caplog.at_level(logging.INFO):
        dag_run = run(transfer_dags, "sql_not_sql", sql="SELECT 1")

    assert state(dag_run, TASK) == "failed"
    assert "connection 'datatables_default' has a DataTablesHook, not a common.sql DbApiHook" in logged(caplog, capfd)
    assert nothing_sent(datatables_conn, stats)


def test_without_common_sql_the_error_names_the_extra(monkeypatch):
    import sys

    from airflow_tables.transfers.sql_to_datatables import SqlToDataTablesOperator
    from airflow_tables.version_compat import AirflowFailException

    monkeypatch.setitem(sys.modules, "airflow.providers.common.sql.hooks.sql", None)  # import fails
    task = SqlToDataTablesOperator(task_id="t", sql="SELECT 1", conn_id=PG_CONN_ID)
    with pytest.raises(AirflowFailException, match=r"pip install 'airflow-tables\[sql\]'"):
        task._db_hook()


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"if_empty": "ignore"}, "if_empty must be one of"),
        ({"file_path": "/data/x.csv"}, "takes a query, not a file: remove file_path"),
        ({"on_bad_rows": "quarantine"}, "needs a rejects_path"),
    ],
)
def test_arguments_no_run_could_use_fail_the_parse(kwargs, says):
    from airflow_tables.transfers.sql_to_datatables import SqlToDataTablesOperator

    with pytest.raises((ValueError, TypeError), match=says):
        SqlToDataTablesOperator(task_id="t", sql="SELECT 1", conn_id=PG_CONN_ID, **kwargs)
