"""DAGs the operator tests run with dag.test(); everything variable comes in through params.

Operator arguments that are not templated (deferrable, timeouts, retries) get one DAG
per variant, named for it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG

from airflow_tables._durable import DurableJobMixin
from airflow_tables.operators.tables import (
    DataTablesDeleteOperator,
    DataTablesImportOperator,
    DataTablesReplaceOperator,
)
from airflow_tables.sensors.tables import DataTablesProcessedSensor

SUITE = str(Path(__file__).parent / "orders_suite.json")
START = datetime(2026, 1, 1)
FAST = {"poll_interval": 0.2, "timeout": 60}
# One retry, at once; waits that give up after 1.5 s (the emulator is told to read for longer).
RETRY = {"poll_interval": 0.2, "retries": 1, "retry_delay": timedelta(0)}


DAGS: dict[str, DAG] = {}


def _dag(dag_id: str) -> DAG:
    dag = DAGS[dag_id] = DAG(
        dag_id, schedule=None, start_date=START, catchup=False, params={"file_path": "", "card_id": ""}
    )
    return dag


for deferrable in (False, True):
    mode = "defer" if deferrable else "poke"
    with _dag(f"dt_import_{mode}"):
        DataTablesImportOperator(task_id="import", file_path="{{ params.file_path }}", deferrable=deferrable, **FAST)
    with _dag(f"dt_replace_{mode}"):
        DataTablesReplaceOperator(
            task_id="replace",
            card_id="{{ params.card_id }}",
            file_path="{{ params.file_path }}",
            deferrable=deferrable,
            **FAST,
        )
    with _dag(f"dt_sensor_{mode}"):
        DataTablesProcessedSensor(
            task_id="wait", card_id="{{ params.card_id }}", deferrable=deferrable, poke_interval=0.2, timeout=60
        )

with _dag("dt_sensor_reschedule"):
    DataTablesProcessedSensor(
        task_id="wait", card_id="{{ params.card_id }}", mode="reschedule", poke_interval=0.2, timeout=60
    )

# The first try gives up waiting after 1.5 s; the retry must re-attach, not import again.
with _dag("dt_import_retry"):
    DataTablesImportOperator(task_id="import", file_path="{{ params.file_path }}", timeout=1.5, **RETRY)

with _dag("dt_replace_retry"):
    DataTablesReplaceOperator(
        task_id="replace", card_id="{{ params.card_id }}", file_path="{{ params.file_path }}", timeout=60, **RETRY
    )


def _finish_writing(context) -> None:
    """The writer finishes the file between the tries: what ``rest`` in the run's conf holds is appended."""
    conf = context["dag_run"].conf
    with open(conf["file_path"], "ab") as out:
        out.write(conf["rest"].encode())


# A file still being written (see test_unfinished): the writer finishes it before the retry. With its rows
# judged one by one (a quarantine, declared types), a cut last record is no bad row either.
for suffix, rows in {
    "": {},
    "_quarantine": {"on_bad_rows": "quarantine"},
    "_declared": {"column_types": {"order_id": "long"}},
}.items():
    with _dag(f"dt_import_unfinished{suffix}"):
        DataTablesImportOperator(
            task_id="import",
            file_path="{{ params.file_path }}",
            on_retry_callback=_finish_writing,
            timeout=60,
            **rows,
            **RETRY,
        )

if issubclass(DataTablesImportOperator, DurableJobMixin):  # Airflow < 3.3: the import is the legacy one
    LegacyImportOperator = DataTablesImportOperator
else:

    class LegacyImportOperator(DurableJobMixin, DataTablesImportOperator):  # type: ignore[no-redef]
        """The import as it runs on Airflow < 3.3: the earlier try's CardID kept in a Variable."""


with _dag("dt_import_retry_legacy"):
    LegacyImportOperator(task_id="import", file_path="{{ params.file_path }}", timeout=1.5, **RETRY)

# Killed from outside while it waits (see test_resume_after_kill).
with _dag("dt_import_slow"):
    DataTablesImportOperator(task_id="import", file_path="{{ params.file_path }}", poll_interval=0.2, timeout=120)

with _dag("dt_import_gx"):
    DataTablesImportOperator(task_id="import", file_path="{{ params.file_path }}", expectations=SUITE, **FAST)

for if_locked in ("fail", "skip"):
    with _dag(f"dt_delete_{if_locked}"):
        DataTablesDeleteOperator(
            task_id="delete", card_id="{{ params.card_id }}", if_locked=if_locked, poll_interval=0.2
        )
with _dag("dt_delete_missing_ok"):
    DataTablesDeleteOperator(task_id="delete", card_id="{{ params.card_id }}", missing_ok=True)
with _dag("dt_delete_no_wait"):
    DataTablesDeleteOperator(task_id="delete", card_id="{{ params.card_id }}", if_processing="fail")

# The fault suite: one mapped import per file, retried through injected faults.
with _dag("dt_fault_suite") as fault_suite:
    from airflow.sdk import task

    @task
    def files(params: dict | None = None) -> list[str]:
        import glob

        return sorted(glob.glob(f"{params['file_path']}/*.csv"))

    DataTablesImportOperator.partial(
        task_id="import",
        poll_interval=0.1,
        timeout=1.0,  # some waits run into added latency, time out, and are retried mid-wait
        retries=6,
        retry_delay=timedelta(0),
    ).expand(file_path=files())

# Arguments that render wrong (issue 18): a card_id or project_id from params, retries on.
with _dag("dt_import_card"):
    DataTablesImportOperator(
        task_id="import", file_path="{{ params.file_path }}", card_id="{{ params.card_id }}", **RETRY
    )
with _dag("dt_import_project") as _project_dag:
    _project_dag.params["project_id"] = ""
    DataTablesImportOperator(
        task_id="import", file_path="{{ params.file_path }}", project_id="{{ params.project_id }}", **RETRY
    )
with _dag("dt_replace_once"):
    DataTablesReplaceOperator(
        task_id="replace", card_id="{{ params.card_id }}", file_path="{{ params.file_path }}", timeout=60, **RETRY
    )
# The service's own 409 for a paused connector's table: no schema check before it (on_schema_change="allow").
with _dag("dt_replace_once_unchecked"):
    DataTablesReplaceOperator(
        task_id="replace",
        card_id="{{ params.card_id }}",
        file_path="{{ params.file_path }}",
        on_schema_change="allow",
        timeout=60,
        **RETRY,
    )
with _dag("dt_sensor_retry"):
    DataTablesProcessedSensor(task_id="wait", card_id="{{ params.card_id }}", poke_interval=0.2, timeout=5, retries=1)

# skip_if_unchanged (issue 14): two DAGs feeding one table share its upload record.
for suffix in ("", "_other"):
    with _dag(f"dt_replace_skip{suffix}"):
        DataTablesReplaceOperator(
            task_id="replace",
            card_id="{{ params.card_id }}",
            file_path="{{ params.file_path }}",
            skip_if_unchanged=True,
            **RETRY,
        )
# A file in Windows-1252, converted to UTF-8 on upload (tests/sources/test_storage.py).
with _dag("dt_import_cp1252"):
    DataTablesImportOperator(task_id="import", file_path="{{ params.file_path }}", encoding="cp1252", **FAST)
with _dag("dt_import_utf16"):
    DataTablesImportOperator(task_id="import", file_path="{{ params.file_path }}", encoding="utf-16", **RETRY)

# Hardening (issue 24). Refusals that no retry can change: retries on, so a retry would show.
with _dag("dt_import_once"):
    DataTablesImportOperator(task_id="import", file_path="{{ params.file_path }}", timeout=60, **RETRY)
with _dag("dt_import_unvalidated"):
    DataTablesImportOperator(task_id="import", file_path="{{ params.file_path }}", validate=False, timeout=60, **RETRY)
# A file_path rendered as a native object (None, a list) instead of a string.
with DAG(
    "dt_import_native",
    schedule=None,
    start_date=START,
    catchup=False,
    params={"file_path": ""},
    render_template_as_native_obj=True,
) as _native_dag:
    DataTablesImportOperator(task_id="import", file_path="{{ params.file_path }}", timeout=60, **RETRY)
DAGS["dt_import_native"] = _native_dag


def _record_notes(context) -> None:
    """on_retry_callback: write down where the task's notes are between its tries (the test reads the file).

    Airflow 3.3's task state store is read from the metadata database: the callback's own
    ``task_state_store`` is keyed by the id of the try that ended, which no longer names the
    task instance once it is up for retry. (dag.test() runs the callback in the test's process.)
    """
    import json

    from airflow_tables._durable import _VariableStore
    from airflow_tables.operators._job import PENDING_KEY

    ti = context["ti"]
    keys = (context["task"].external_id_key, PENDING_KEY)
    variables = _VariableStore(context)
    state = None
    if context.get("task_state_store") is not None:
        from airflow.models.task_state_store import TaskStateStoreModel
        from airflow.utils.session import create_session
        from sqlalchemy import select

        with create_session() as session:
            rows = session.scalars(
                select(TaskStateStoreModel).where(
                    TaskStateStoreModel.dag_id == ti.dag_id,
                    TaskStateStoreModel.run_id == ti.run_id,
                    TaskStateStoreModel.task_id == ti.task_id,
                )
            )
            state = {row.key: json.loads(row.value) for row in rows}
    with open(context["params"]["notes_file"], "w") as out:
        json.dump(
            {
                "try_number": ti.try_number,
                "variables": {key: variables.get(key) for key in keys},
                "task_state_store": state,
            },
            out,
        )


# Where a try's notes live between tries, and that nothing is left behind once the task has ended.
for _name, _operator in (("", DataTablesImportOperator), ("_legacy", LegacyImportOperator)):
    with _dag(f"dt_import_notes{_name}") as _notes_dag:
        _notes_dag.params["notes_file"] = ""
        _operator(
            task_id="import",
            file_path="{{ params.file_path }}",
            timeout=1.5,
            on_retry_callback=_record_notes,
            **RETRY,
        )


# -- safe writes (issue 26) ------------------------------------------------------------------------------
def _import_sibling(context) -> None:
    """on_retry_callback: another client imports ``params.sibling`` (a file of the same name) between the tries."""
    from airflow_tables.hooks.tables import DataTablesHook

    sibling = context["params"].get("sibling")
    if sibling:
        hook = DataTablesHook()
        card_id = hook.send_import(None, sibling)  # a plain client: no note of its own
        hook.wait_for_table(None, card_id, poll_interval=0.05, timeout=30)


with _dag("dt_import_sibling") as _sibling_dag:
    _sibling_dag.params["sibling"] = ""
    DataTablesImportOperator(
        task_id="import",
        file_path="{{ params.file_path }}",
        on_retry_callback=_import_sibling,
        poll_interval=0.2,
        timeout=60,
        retries=2,  # a refusal must fail at the second try, not use the third
        retry_delay=timedelta(0),
    )

with _dag("dt_import_named") as _named_dag:
    _named_dag.params["table_name"] = ""
    DataTablesImportOperator(
        task_id="import", file_path="{{ params.file_path }}", table_name="{{ params.table_name }}", timeout=60, **RETRY
    )

for _policy in ("fail", "warn"):
    with _dag(f"dt_import_read_{_policy}"):
        DataTablesImportOperator(
            task_id="import", file_path="{{ params.file_path }}", on_read_mismatch=_policy, timeout=60, **RETRY
        )
    with _dag(f"dt_import_read_{_policy}_defer"):
        DataTablesImportOperator(
            task_id="import",
            file_path="{{ params.file_path }}",
            on_read_mismatch=_policy,
            deferrable=True,
            timeout=60,
            **RETRY,
        )

# A replacement whose wait looks late (poll_interval 4 s): another client's refresh may come first.
with _dag("dt_replace_late_look"):
    DataTablesReplaceOperator(
        task_id="replace",
        card_id="{{ params.card_id }}",
        file_path="{{ params.file_path }}",
        skip_if_unchanged=True,
        poll_interval=4.0,
        timeout=60,
        retries=1,
        retry_delay=timedelta(0),
    )

# Two mapped replacements of one table in one run.
with _dag("dt_replace_mapped_twice"):
    from airflow.sdk import task as _task

    @_task
    def _same_table_twice(params: dict | None = None) -> list[str]:
        return [params["card_id"], params["card_id"]]

    DataTablesReplaceOperator.partial(
        task_id="replace", file_path="{{ params.file_path }}", poll_interval=0.2, timeout=60
    ).expand(card_id=_same_table_twice())

# Mapped imports that would name two tables alike (issue 37, point 9): every CSV under params.file_path.
with _dag("dt_import_mapped_alike"):
    from airflow.sdk import task as _task

    @_task
    def _csvs_under(params: dict | None = None) -> list[str]:
        return sorted(str(p) for p in Path(params["file_path"]).rglob("*.csv"))

    _files = _csvs_under()
    DataTablesImportOperator.partial(task_id="by_file_name", timeout=60, **RETRY).expand(file_path=_files)
    DataTablesImportOperator.partial(task_id="named_in_partial", table_name="daily", timeout=60, **RETRY).expand(
        file_path=_files
    )

_FROM_PARAMS = {"card_id": "{{ params.card_id }}", "file_path": "{{ params.file_path }}"}
with _dag("dt_replace_named"):
    DataTablesReplaceOperator(task_id="replace", table_name="renamed", **_FROM_PARAMS, **FAST)

# The hook in a @task with retries: a lost answer must not import twice.
with _dag("dt_hook_task"):
    from airflow.sdk import task as _task

    @_task(retries=2, retry_delay=timedelta(0))
    def hook_import(params: dict | None = None) -> str:
        from airflow_tables.hooks.tables import DataTablesHook

        hook = DataTablesHook()
        card_id = hook.import_csv(None, params["file_path"])
        hook.wait_for_table(None, card_id, poll_interval=0.1, timeout=30)
        return card_id

    hook_import()


# -- what outside looks broke (issue 36) -------------------------------------------------------------------
def _set_emulator_faults(rules: list[dict]) -> None:
    """From inside a task: the emulator's fault rules, through its test controls on the connection's host."""
    import json
    import urllib.request

    from airflow.sdk import BaseHook

    host = BaseHook.get_connection("datatables_default").host
    request = urllib.request.Request(
        f"{host}/_emulator/faults",
        data=json.dumps({"rules": rules}).encode(),
        method="PUT",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 200


with _dag("dt_hook_then_fails"):
    from airflow.sdk import task as _task

    @_task(retries=1, retry_delay=timedelta(0))
    def hook_import_then_fail(params: dict | None = None) -> str:
        """Point 2: the import was answered, then a later step of the task fails on its first try."""
        from airflow.sdk import get_current_context

        from airflow_tables.hooks.tables import DataTablesHook

        card_id = DataTablesHook().import_csv(None, params["file_path"])
        if get_current_context()["ti"].try_number == 1:
            raise RuntimeError("a later step of the task failed")
        return card_id

    hook_import_then_fail()

with _dag("dt_hook_two_files") as _two_files_dag:
    _two_files_dag.params["sibling"] = ""
    from airflow.sdk import task as _task

    @_task(retries=1, retry_delay=timedelta(0))
    def hook_import_two(params: dict | None = None) -> list[str]:
        """Point 2: two files called orders.csv in one task; the second's answer is lost on the first try."""
        from airflow.sdk import get_current_context

        from airflow_tables.hooks.tables import DataTablesHook

        hook = DataTablesHook()
        first = hook.import_csv(None, params["file_path"])
        if get_current_context()["ti"].try_number == 1:
            _set_emulator_faults([{"methods": ["POST"], "path": "/data/import", "drop": "after", "times": 1}])
        second = hook.import_csv(None, params["sibling"])
        return [first, second]

    hook_import_two()

with _dag("dt_hook_task_sibling") as _hook_sibling_dag:
    _hook_sibling_dag.params["sibling"] = ""
    from airflow.sdk import task as _task

    @_task(retries=1, retry_delay=timedelta(0), on_retry_callback=_import_sibling)
    def hook_import_sibling(params: dict | None = None) -> str:
        """Point 3: a sibling of the same shape lands between the tries of a lost import."""
        from airflow_tables.hooks.tables import DataTablesHook

        return DataTablesHook().import_csv(None, params["file_path"])

    hook_import_sibling()


def _lower_retries(context) -> None:
    """on_retry_callback: the DAG file's ``retries`` lowered between two tries (a deploy between them).

    Each try runs a copy of the task (``prepare_for_execution``); the DAG's own is what the next copies.
    """
    DAGS[context["ti"].dag_id].get_task(context["ti"].task_id).retries = 1


with _dag("dt_hook_retries_lowered"):
    from airflow.sdk import task as _task

    @_task(retries=3, retry_delay=timedelta(0), on_retry_callback=_lower_retries)
    def hook_import_lowered(params: dict | None = None) -> str:
        """Point 4: a lost answer, and ``retries`` lowered from 3 to 1 before the retry."""
        from airflow_tables.hooks.tables import DataTablesHook

        return DataTablesHook().import_csv(None, params["file_path"])

    hook_import_lowered()


with _dag("dt_forge_upload_record") as _forge_dag:
    _forge_dag.params["extra"] = {}
    from airflow.sdk import task as _task

    from airflow_tables.utils.events import TABLES_ALIAS as _ALIAS

    @_task(outlets=[_ALIAS])
    def forge(params: dict | None = None, outlet_events=None) -> None:
        """Point 9: another DAG records an event on the table's asset with the extras of an upload record."""
        from airflow_tables.assets import asset_of, table_ref
        from airflow_tables.hooks.tables import DataTablesHook

        settings = DataTablesHook().settings
        ref = table_ref(settings.project_id or "", params["card_id"], service=settings.base_url)
        outlet_events[_ALIAS].add(asset_of(ref), extra=dict(params["extra"]))

    forge()
