"""A SQL query's result imported as a table: any connection whose hook is a common.sql ``DbApiHook``.

:class:`SqlToDataTablesOperator` is the import operator with a query in place of a file: it
overrides how the source is made (:meth:`~SqlToDataTablesOperator.found_source`), and
everything after is the import operator's own code, unchanged: validation, the schema guard,
the backfill guard, ``skip_if_unchanged``, bad rows, send-once (a retry after a lost answer
adopts the table its first try made), the deferrable wait, the read check, the asset event
and the "Open table" link. The result is streamed into one bounded local CSV by
:mod:`airflow_tables.sources.query`, by the Parquet conversion's rules. See docs/transfers.md.

Importing this module (what a DAG file does) imports neither common.sql nor a database driver.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from airflow_tables.operators.tables import DataTablesImportOperator
from airflow_tables.utils import openlineage
from airflow_tables.version_compat import AirflowException, AirflowFailException, AirflowSkipException

if TYPE_CHECKING:
    from airflow_tables.sources import Source

__all__ = ["IF_EMPTY", "SqlToDataTablesOperator"]

#: What ``if_empty`` may say: a query that returns no rows fails the task, skips it, or imports the header alone.
IF_EMPTY = ("fail", "skip", "import")
#: The import operator's arguments that name a file: a transfer has a query instead.
_FILE_ARGUMENTS = ("file_path", "encoding", "input_format", "combine", "allowed_sources")
#: What to install for ``DbApiHook`` (common.sql), named in the error when it is missing.
SQL_EXTRA = "pip install 'airflow-tables[sql]'"


class SqlToDataTablesOperator(DataTablesImportOperator):
    """Import the result of a SQL query as a new table, or as an existing table's new data when ``card_id`` is given.

    The query runs on ``conn_id``, any Airflow connection whose hook is a common.sql ``DbApiHook``
    (PostgreSQL, MySQL, SQLite, Snowflake, BigQuery, ...). Its result is streamed into a local CSV
    (PostgreSQL through ``COPY``, others through ``fetchmany``), never held whole in memory, its
    values written by the rules of the Parquet conversion (docs/transfers.md, "Values"); that CSV
    then goes through the import operator's path unchanged, with the same knobs and guarantees.
    A result over 300 columns or 512 MB, or with a column that has no CSV form (bytes, arrays,
    intervals), fails the task before anything is sent. Returns the CardID.

    :param sql: the query (templated; a ``.sql`` file is read as a template). One statement that
        returns rows; it runs in a transaction that is rolled back.
    :param conn_id: the connection to run it on; its hook must be a ``DbApiHook`` (needs
        ``airflow-tables[sql]``).
    :param parameters: the query's parameters (templated), in the driver's style (``%s`` or
        ``%(name)s`` for psycopg2, ``?`` for SQLite).
    :param table_name: the name people see (templated); the upload is sent as ``<table_name>.csv``.
        Default: the task's id.
    :param card_id: a table whose data to replace (templated), as on the import operator.
    :param project_id: the department (templated); default: the ``datatables`` connection's ``project_id``.
    :param if_empty: a query that returns no rows: ``"fail"`` (default; an empty table replacing
        yesterday's data is rarely what anyone wants), ``"skip"`` (the task is skipped, nothing is
        sent) or ``"import"`` (a file of the header alone: an empty table).
    :param kwargs: every other parameter of :class:`~airflow_tables.operators.tables.DataTablesImportOperator`
        except those that name a file (``file_path``, ``encoding``, ``input_format``, ``combine``,
        ``allowed_sources``). ``on_bad_rows="quarantine"`` needs a ``rejects_path``: the result has no
        folder of its own to write them beside.
    """

    template_fields: Sequence[str] = (
        "sql",
        "parameters",
        "table_name",
        "card_id",
        "project_id",
        "partition_key",
        "rejects_path",
    )
    template_ext: Sequence[str] = (".sql",)
    template_fields_renderers = {"sql": "sql", "parameters": "json"}
    ui_color = "#e0e7ff"

    def __init__(
        self,
        *,
        sql: str,
        conn_id: str,
        parameters: Any = None,
        table_name: str | None = None,
        card_id: str | None = None,
        project_id: str | None = None,
        if_empty: str = "fail",
        **kwargs: Any,
    ) -> None:
        given = sorted(set(_FILE_ARGUMENTS) & kwargs.keys())
        if given:
            raise TypeError(f"SqlToDataTablesOperator takes a query, not a file: remove {', '.join(given)}")
        if if_empty not in IF_EMPTY:
            raise ValueError(f"if_empty must be one of {', '.join(map(repr, IF_EMPTY))}, not {if_empty!r}")
        if kwargs.get("on_bad_rows") == "quarantine" and kwargs.get("rejects_path") is None:
            raise ValueError("on_bad_rows='quarantine' needs a rejects_path: a query's result has no folder of its own")
        # file_path names the result in the import path's messages ("query on connection 'pg': ...").
        super().__init__(
            file_path=f"query on connection {conn_id!r}",
            table_name=table_name,
            card_id=card_id,
            project_id=project_id,
            **kwargs,
        )
        self.sql = sql
        self.conn_id = conn_id
        self.parameters = parameters
        self.if_empty = if_empty

    # -- the source: the query's result instead of a file ------------------------------------------

    def source_problem(self) -> str | None:
        """What is wrong with ``sql`` as it rendered (``None``: nothing); checked before the query runs."""
        if not isinstance(self.sql, str) or not self.sql.strip():
            return f"sql is {self.sql!r}; give the query whose result to import"
        return None

    @contextlib.contextmanager
    def found_source(self) -> Iterator[Source]:
        """The query's result as a local CSV, for the time of the block; the connection closed once it is read.

        Fails the task, before any request to the service: without retry when the result cannot be
        imported as it is (:class:`~airflow_tables.sources.query.QueryRefused`) or is empty under
        ``if_empty="fail"``; with the task's retries when the query itself fails (the database's
        message is the error's).
        """
        from airflow_tables.sources.query import QueryRefused, staged_result

        hook = self._db_hook()
        self._query_inputs = openlineage.sql_inputs(hook, self.sql)  # here, where the connection can be read
        connection = hook.get_conn()
        with contextlib.ExitStack() as stack:
            try:
                staging = staged_result(
                    connection, self.sql, self.parameters, name=self._csv_name(), label=str(self.file_path)
                )
                result = stack.enter_context(staging)
            except QueryRefused as err:
                raise AirflowFailException(f"{err}; nothing was sent to the Data Tables Service") from None
            except Exception as err:
                self.log.error("The query on connection %r failed: %s", self.conn_id, err)
                raise AirflowException(
                    f"the query on connection {self.conn_id!r} failed ({type(err).__name__}: {err}); "
                    "nothing was sent to the Data Tables Service"
                ) from err
            finally:
                with contextlib.suppress(Exception):
                    connection.close()
            self.log.info(
                "The query on connection %r returned %s rows of %s columns (%s bytes of CSV)",
                self.conn_id,
                f"{result.rows:,}",
                len(result.columns),
                f"{result.source.stored_size:,}",
            )
            if result.rows == 0:
                self._when_empty()
            yield result.source

    def named_inputs(self, **facts: Any) -> list[openlineage.DatasetFacts]:
        """The tables the query reads (known once it has run), with the data-quality verdict on its result.

        The result's schema and counts are the table's (its output), not any one input's.
        """
        assertions = facts.get("assertions")
        return [openlineage.with_facts(d, assertions=assertions) for d in getattr(self, "_query_inputs", [])]

    def source_stamp(self, source: Source) -> str | None:
        """No stamp: a query's result has no version to compare, so a cleared task always runs it again."""
        return None

    def _when_empty(self) -> None:
        """``if_empty``: fail or skip (nothing sent), or go on with the header alone."""
        said = f"the query on connection {self.conn_id!r} returned no rows"
        if self.if_empty == "fail":
            raise AirflowFailException(
                f"{said}; nothing was sent to the Data Tables Service (if_empty='fail'; if_empty='skip' skips "
                "the task, if_empty='import' imports an empty table)"
            )
        if self.if_empty == "skip":
            raise AirflowSkipException(f"{said}; nothing was sent (if_empty='skip')")
        self.log.warning("%s; importing the header alone (if_empty='import'): the table will be empty", said)

    def _csv_name(self) -> str:
        """The staged file's name, which names the upload: ``<table_name>.csv``, else ``<task_id>.csv``."""
        return f"{self.table_name or self.task_id}.csv"

    def _db_hook(self) -> Any:
        """``conn_id``'s hook, which must be a common.sql ``DbApiHook`` (the extra ``airflow-tables[sql]``)."""
        try:
            from airflow.providers.common.sql.hooks.sql import DbApiHook
        except ImportError:
            raise AirflowFailException(
                f"{self.task_id}: SqlToDataTablesOperator needs the common.sql provider "
                f"(apache-airflow-providers-common-sql): {SQL_EXTRA}"
            ) from None
        from airflow.sdk import BaseHook

        hook = BaseHook.get_connection(self.conn_id).get_hook()
        if not isinstance(hook, DbApiHook):
            raise AirflowFailException(
                f"{self.task_id}: connection {self.conn_id!r} has a {type(hook).__name__}, not a common.sql "
                "DbApiHook: SqlToDataTablesOperator runs queries on SQL databases' connections only (its type's "
                "provider must be installed: apache-airflow-providers-postgres for 'postgres', ...)"
            )
        return hook
