"""OpenLineage for every Data Tables task: facts gathered where they are found, facets built without I/O.

The OpenLineage provider calls a task's ``get_openlineage_facets_on_*`` methods in a child it
forks from the task's process (its default), where an XCom, Connection or Variable lookup hangs
until the provider kills the child: the event is lost and the task waits ``execution_timeout``
for nothing. So the tasks keep what they learn as they run (:class:`TaskLineage`, on the task:
the file and what validation found, the table and what its read showed) and the methods of
:class:`OpenLineageMixin` only turn those facts into facets: they work in a forked child, in a
thread (``execute_in_thread``) and on every supported Airflow.

Names follow OpenLineage's naming spec so that our datasets join other providers': a local file is
``file`` + its absolute path; an object is ``s3://<bucket>`` (``gs://<bucket>``) + its key, no
leading slash; a table is ``datatables://<service>`` + ``<ProjectID>/<CardID>``
(:mod:`airflow_tables.assets`). The client is imported only when the provider asks for facets.
"""

from __future__ import annotations

import logging
import os
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:
    from airflow_tables.assets import TableRef
    from airflow_tables.model import TableDetail, TableSummary

log = logging.getLogger(__name__)

#: Object stores whose OpenLineage namespace is ``<scheme>://<bucket>`` under the spec's own scheme name.
_BUCKET_SCHEMES = {"s3": "s3", "s3a": "s3", "s3n": "s3", "gs": "gs", "gcs": "gs"}

#: What a task did to a table, as OpenLineage's lifecycle facet names it.
CREATE, OVERWRITE, DROP = "CREATE", "OVERWRITE", "DROP"


@dataclass(frozen=True)
class Assertion:
    """One data-quality check and its verdict (OpenLineage's ``dataQualityAssertions``)."""

    assertion: str
    success: bool
    column: str | None = None
    actual: str | None = None


@dataclass(frozen=True)
class DatasetFacts:
    """What a task knows of one dataset it read or wrote.

    :param columns: ``(name, type)`` of each column, the type ``None`` when not known.
    :param rows: its data rows; ``size``: its bytes (a file's as stored, a table's as sent).
    :param change: what the task did to it: :data:`CREATE`, :data:`OVERWRITE` or :data:`DROP`.
    :param assertions: the checks it passed or failed (validation, expectations, bad rows).
    :param bad_rows: rows set aside by ``on_bad_rows="quarantine"``.
    """

    namespace: str
    name: str
    columns: tuple[tuple[str, str | None], ...] = ()
    rows: int | None = None
    size: int | None = None
    change: str | None = None
    assertions: tuple[Assertion, ...] = ()
    bad_rows: int | None = None


@dataclass
class TaskLineage:
    """The datasets a try read and wrote, as far as it has got: updated as the facts come in."""

    inputs: list[DatasetFacts] = field(default_factory=list)
    outputs: list[DatasetFacts] = field(default_factory=list)


# -- names ------------------------------------------------------------------------------------


def file_dataset(file_path: Any, **facts: Any) -> DatasetFacts:
    """The dataset of a local path (``file``) or an object (``s3://bucket`` and its key), named by the spec."""
    from airflow_tables.sources.storage import is_storage_path, is_uri, label_of

    if is_uri(file_path) or is_storage_path(file_path):
        parts = urlsplit(label_of(file_path))
        scheme = parts.scheme.lower()
        bucket = parts.netloc.rpartition("@")[2]  # a connection id is no part of a dataset's name
        if scheme == "file":
            return DatasetFacts("file", os.path.abspath(unquote(parts.path)), **facts)
        namespace = f"{_BUCKET_SCHEMES.get(scheme, scheme)}://{bucket}" if bucket else scheme
        return DatasetFacts(namespace, unquote(parts.path).lstrip("/"), **facts)
    return DatasetFacts("file", os.path.abspath(os.fspath(file_path)), **facts)


def file_datasets(file_path: Any, **facts: Any) -> list[DatasetFacts]:
    """Each file ``file_path`` names: a list is one per part; a pattern or prefix (``combine=``) is its folder.

    The files a pattern matches are known only once listed, and a folder is how OpenLineage's
    integrations name a dataset written as many files (a literal name that holds ``*`` and
    exists is one file to the operators, and named as its folder here: the folder is a dataset too).
    """
    from airflow_tables.sources.parts import names_many

    if isinstance(file_path, (list, tuple)):
        return [file_dataset(p, **facts) for p in file_path]
    if names_many(file_path):
        text = os.fspath(file_path)
        return [file_dataset(text.rstrip("/") if text.endswith("/") else text.rsplit("/", 1)[0], **facts)]
    return [file_dataset(file_path, **facts)]


def table_dataset(ref: TableRef, **facts: Any) -> DatasetFacts:
    """The dataset of a table (:class:`~airflow_tables.assets.TableRef`'s namespace and name)."""
    return DatasetFacts(ref.namespace, ref.name, **facts)


def facts_to_json(datasets: list[DatasetFacts]) -> list[dict[str, Any]]:
    """Datasets as JSON, kept with an import's job so that the try that resumes it (after a deferral) has them."""
    return [
        {
            **asdict(d),
            "columns": [list(c) for c in d.columns],
            "assertions": [asdict(a) for a in d.assertions],
        }
        for d in datasets
    ]


def facts_from_json(value: object) -> list[DatasetFacts]:
    """The datasets :func:`facts_to_json` wrote; an empty list for anything else (lineage then names the file only)."""
    if not isinstance(value, list):
        return []
    try:
        return [
            DatasetFacts(
                **{
                    **each,
                    "columns": tuple((str(n), t if isinstance(t, str) else None) for n, t in each.get("columns", ())),
                    "assertions": tuple(Assertion(**a) for a in each.get("assertions", ())),
                }
            )
            for each in value
        ]
    except (TypeError, ValueError, AttributeError):
        return []


def sql_inputs(hook: Any, sql: str) -> list[DatasetFacts]:
    """The tables a query reads, named as the OpenLineage provider names them for ``SQLExecuteQueryOperator``.

    Its SQL parser, on the database the ``DbApiHook`` says it is (``get_openlineage_database_info``);
    no lookup of the tables' schemas (a query to the database). Called in ``execute``, where the hook
    has its connection; ``[]`` when the provider is not installed or is disabled, when the hook's
    database is unknown to OpenLineage (SQLite), or when the query cannot be parsed.
    """
    try:
        from airflow.providers.openlineage import conf as lineage_conf
        from airflow.providers.openlineage.sqlparser import SQLParser
    except ImportError:
        return []
    if lineage_conf.is_disabled():
        return []
    try:
        connection = hook.get_connection(getattr(hook, hook.conn_name_attr))
        database = hook.get_openlineage_database_info(connection)
        if database is None:
            return []
        parser = SQLParser(
            dialect=hook.get_openlineage_database_dialect(connection),
            default_schema=hook.get_openlineage_default_schema(),
        )
        found = parser.generate_openlineage_metadata_from_sql(
            sql=sql, hook=hook, database_info=database, use_connection=False
        )
    except Exception as err:  # lineage never fails a transfer
        log.debug("no lineage for the query: %s", err)
        return []
    return [DatasetFacts(d.namespace, d.name) for d in found.inputs]


# -- facts ------------------------------------------------------------------------------------


def validated(report: Any, *, bad_rows: int | None = None, gx_result: Any = None) -> dict[str, Any]:
    """What validation (and the expectations, and a quarantine) found in a file, as :class:`DatasetFacts` fields.

    ``report`` is the validation report (``None``: the file was not validated); ``gx_result``
    the suite's ``describe_dict()``.
    """
    facts: dict[str, Any] = {}
    assertions: list[Assertion] = []
    if report is not None:
        types = report.column_types or [None] * len(report.columns)
        facts.update(columns=tuple(zip(report.columns, types, strict=False)), rows=report.rows)
        assertions.append(Assertion("datatables_csv_rules", bool(report.ok), actual=f"{len(report.errors)} errors"))
    if bad_rows is not None:
        facts["bad_rows"] = bad_rows
        assertions.append(Assertion("datatables_bad_rows_within_threshold", True, actual=str(bad_rows)))
    assertions.extend(expectation_assertions(gx_result))
    if assertions:
        facts["assertions"] = tuple(assertions)
    return facts


def expectation_assertions(result: Any) -> list[Assertion]:
    """Each expectation of a Great Expectations result (``describe_dict()``) as an assertion."""
    if not isinstance(result, dict):
        return []
    found = []
    for each in result.get("expectations") or []:
        if not isinstance(each, dict):
            continue
        kind = each.get("expectation_type") or each.get("type") or "expectation"
        column = (each.get("kwargs") or {}).get("column")
        unexpected = (each.get("result") or {}).get("unexpected_count")
        found.append(
            Assertion(
                str(kind),
                bool(each.get("success")),
                column if isinstance(column, str) else None,
                None if unexpected is None else f"{unexpected} unexpected",
            )
        )
    return found


def read_table(table: TableSummary | None, detail: TableDetail | None) -> dict[str, Any]:
    """What the service's read of a table showed, as :class:`DatasetFacts` fields: its rows, its typed columns."""
    facts: dict[str, Any] = {}
    if table is not None and table.rows is not None:
        facts["rows"] = table.rows
    if detail is not None:
        if detail.rows is not None:
            facts["rows"] = detail.rows
        if detail.columns:
            facts["columns"] = tuple((c.name or "", c.data_type) for c in detail.columns)
    return facts


def with_facts(dataset: DatasetFacts, **facts: Any) -> DatasetFacts:
    """``dataset`` with the facts given (a ``None`` leaves a field as it was)."""
    return replace(dataset, **{k: v for k, v in facts.items() if v is not None})


# -- the provider's methods ---------------------------------------------------------------------


class OpenLineageMixin:
    """``get_openlineage_facets_on_start/complete/failure`` from facts kept on the task: no I/O in them.

    A task sets :attr:`lineage` as it learns (``self.lineage.outputs = [...]``) and says in
    :meth:`lineage_at_start` what is known before it runs: its rendered arguments, and the
    service when the connection was read while its templates were rendered (it always is for a
    task that is not mapped: see :class:`~airflow_tables.utils.tasks.DataTablesTaskMixin`).
    """

    @property
    def lineage(self) -> TaskLineage:
        """What this try has learned so far (created on first use: the task's ``__init__`` stays the operator's)."""
        found = self.__dict__.get("_datatables_lineage")
        if found is None:
            found = TaskLineage()
            self.__dict__["_datatables_lineage"] = found
        return found

    def lineage_at_start(self) -> TaskLineage:
        """What is known before the task runs; a task with datasets of its own overrides this."""
        return TaskLineage()

    def lineage_writes(self) -> bool:
        """Whether this try may write the datasets its outputs name (a dry run writes none: no outputs then)."""
        return True

    def _lineage_so_far(self) -> TaskLineage:
        """What was learned, each side falling back on what was known at the start."""
        start, learned = self.lineage_at_start(), self.lineage
        return self._as_run(TaskLineage(learned.inputs or start.inputs, learned.outputs or start.outputs))

    def _as_run(self, lineage: TaskLineage) -> TaskLineage:
        return lineage if self.lineage_writes() else TaskLineage(lineage.inputs, [])

    def get_openlineage_facets_on_start(self) -> Any:
        """START: the datasets known before the task runs (called by the OpenLineage provider only)."""
        return operator_lineage(self._as_run(self.lineage_at_start()))

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """COMPLETE: every dataset with what the task found (no lookup: ``task_instance`` is not used)."""
        return operator_lineage(self._lineage_so_far())

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        """FAIL: what the task had learned when it failed."""
        return operator_lineage(self._lineage_so_far())


def operator_lineage(lineage: TaskLineage) -> Any:
    """The provider's ``OperatorLineage`` of the facts: datasets and their facets."""
    from airflow.providers.openlineage.extractors import OperatorLineage

    return OperatorLineage(
        inputs=[_dataset(d, output=False) for d in lineage.inputs],
        outputs=[_dataset(d, output=True) for d in lineage.outputs],
    )


def _dataset(facts: DatasetFacts, *, output: bool) -> Any:
    """One OpenLineage dataset: its schema, statistics, lifecycle change and data quality, as far as known."""
    from openlineage.client.event_v2 import InputDataset, OutputDataset
    from openlineage.client.facet_v2 import (
        data_quality_assertions_dataset,
        data_quality_metrics_input_dataset,
        input_statistics_input_dataset,
        lifecycle_state_change_dataset,
        output_statistics_output_dataset,
        schema_dataset,
    )

    facets: dict[str, Any] = {}
    if facts.columns:
        facets["schema"] = schema_dataset.SchemaDatasetFacet(
            fields=[
                schema_dataset.SchemaDatasetFacetFields(name=name, type=kind, ordinal_position=position)
                for position, (name, kind) in enumerate(facts.columns, start=1)
            ]
        )
    if facts.change is not None:
        facets["lifecycleStateChange"] = lifecycle_state_change_dataset.LifecycleStateChangeDatasetFacet(
            lifecycleStateChange=lifecycle_state_change_dataset.LifecycleStateChange(facts.change)
        )
    if facts.assertions:
        facets["dataQualityAssertions"] = data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet(
            assertions=[
                data_quality_assertions_dataset.Assertion(
                    assertion=a.assertion, success=a.success, column=a.column, actual=a.actual
                )
                for a in facts.assertions
            ]
        )
    counted = facts.rows is not None or facts.size is not None
    if output:
        output_facets: dict[str, Any] = {}
        if counted:
            output_facets["outputStatistics"] = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                rowCount=facts.rows, size=facts.size
            )
        return OutputDataset(namespace=facts.namespace, name=facts.name, facets=facets, outputFacets=output_facets)
    input_facets: dict[str, Any] = {}
    if counted:
        input_facets["inputStatistics"] = input_statistics_input_dataset.InputStatisticsInputDatasetFacet(
            rowCount=facts.rows, size=facts.size
        )
        input_facets["dataQualityMetrics"] = data_quality_metrics_input_dataset.DataQualityMetricsInputDatasetFacet(
            columnMetrics={}, rowCount=facts.rows, bytes=facts.size
        )
    return InputDataset(namespace=facts.namespace, name=facts.name, facets=facets, inputFacets=input_facets)
