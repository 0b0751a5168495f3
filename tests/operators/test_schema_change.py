"""``on_schema_change`` in real DAG runs (dag.test()) against the emulator: every case and every policy.

The table is the orders file of the operator tests (order_id, region, amount, note: long,
string, long, string). A refused replace must cost nothing: no import request, the credits and
the table as they were, one try only (each DAG may retry once). An approval is given, or refused,
through the same call the api-server's HITL endpoint makes (``PATCH .../hitlDetails``), from a
thread, while the run waits for it.
"""

from __future__ import annotations

import csv
import logging
import re
import threading
import time
from pathlib import Path

import pytest
from tests._dag_files import imported
from tests.operators._runs import import_table, orders_csv, run, state

ORDERS = ["order_id", "region", "amount", "note"]
# A run that waits for an answer nobody gives would wait for ever (dag.test() has no deadline for it).
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def sw_dags(dags_module):
    """tests/operators/dags/safe_writes_test_dags.py, as installed in Airflow's dags folder by ``dags_module``."""
    return imported("safe_writes_test_dags.py")


def write_csv(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def orders_like(tmp_path: Path, header: list[str], name: str = "new.csv", **values: object) -> Path:
    """Ten rows of ``header``'s columns: the orders' own values, or ``values[column]`` for every row."""
    base = {"order_id": lambda i: i + 1, "region": lambda i: "North", "amount": lambda i: 10 + i, "note": lambda i: ""}
    rows = [[values.get(c, base.get(c, lambda i: f"x{i}")(i)) for c in header] for i in range(10)]
    return write_csv(tmp_path / name, header, rows)


@pytest.fixture
def table(datatables_conn, tmp_path):
    """The orders table, read; and what it is before the test's run (summary, columns, credits)."""
    emulator = datatables_conn
    card_id = import_table(emulator, orders_csv(tmp_path, "orders.csv", rows=20))
    emulator.wait_until_processed(emulator.project_id, card_id)
    emulator.reset_stats()
    return card_id, snapshot(emulator, card_id)


def snapshot(emulator, card_id: str) -> dict:
    from airflow_tables.hooks.tables import DataTablesHook

    detail = DataTablesHook().get_card(emulator.project_id, card_id)
    return {
        "rows": detail["Rows"],
        "columns": [(c["ColumnName"], c["DataType"]) for c in detail["Columns"]],
        "completed": detail["UploadCompletionTime"],
        "credits": emulator.credits(),
    }


def imports(emulator) -> list[dict]:
    return [r for r in emulator.stats()["requests"] if r["method"] == "POST" and r["path"].endswith("/data/import")]


def assert_nothing_sent(emulator, dag_run, card_id: str, before: dict) -> None:
    """A refused replace: failed on its first try, no import request, credits and table as they were."""
    ti = dag_run.get_task_instance("replace")
    assert str(ti.state) == "failed" and ti.try_number == 1
    assert imports(emulator) == []
    after = snapshot(emulator, card_id)
    assert after == before


def logged(caplog, capfd) -> str:
    return caplog.text + "".join(capfd.readouterr())


def test_a_new_column_passes_by_default(sw_dags, table, tmp_path):
    card_id, before = table
    emulator_rows = orders_like(tmp_path, [*ORDERS, "discount"], discount=5)
    dag_run = run(sw_dags, "sw_schema_allow_new_columns", file_path=str(emulator_rows), card_id=card_id)
    assert state(dag_run, "replace") == "success"


@pytest.mark.parametrize(
    ("header", "values", "says"),
    [
        (["order_id", "region", "amount"], {}, "note: removed"),
        (["order_id", "region", "total", "note"], {"total": 3}, "amount: renamed to total"),
        (ORDERS, {"amount": "n/a"}, "amount: long -> string"),
        (["order_id", "amount", "note"], {}, "region: removed"),
        # Issue 37, point 10: a column empty in today's file is typed string for want of values; say so.
        (ORDERS, {"amount": ""}, "amount: long -> string (the column is empty in this file"),
    ],
    ids=["removed", "renamed", "retyped", "removed-middle", "emptied"],
)
@pytest.mark.parametrize("dag_id", ["sw_schema_allow_new_columns", "sw_schema_import_card"])
def test_a_breaking_change_fails_and_costs_nothing(
    sw_dags, datatables_conn, table, tmp_path, caplog, capfd, header, values, says, dag_id
):
    card_id, before = table
    path = orders_like(tmp_path, header, **values)
    with caplog.at_level(logging.INFO):
        dag_run = run(sw_dags, dag_id, file_path=str(path), card_id=card_id)
    assert_nothing_sent(datatables_conn, dag_run, card_id, before)
    text = logged(caplog, capfd)
    assert says in text and "Nothing was sent, no credit was spent" in text


def test_every_difference_is_listed(sw_dags, datatables_conn, table, tmp_path, caplog, capfd):
    card_id, before = table
    path = orders_like(tmp_path, ["order_id", "amount", "extra"], amount="n/a")
    with caplog.at_level(logging.INFO):
        dag_run = run(sw_dags, "sw_schema_allow_new_columns", file_path=str(path), card_id=card_id)
    assert_nothing_sent(datatables_conn, dag_run, card_id, before)
    text = logged(caplog, capfd)
    assert "region: removed; note: removed; amount: long -> string" in text


def test_reordered_columns_pass_by_default_and_fail_under_fail(
    sw_dags, datatables_conn, table, tmp_path, caplog, capfd
):
    card_id, before = table
    path = orders_like(tmp_path, ["region", "order_id", "amount", "note"])
    with caplog.at_level(logging.INFO):
        refused = run(sw_dags, "sw_schema_fail", file_path=str(path), card_id=card_id)
    assert_nothing_sent(datatables_conn, refused, card_id, before)
    assert "region: moved from column 2 to 1" in logged(caplog, capfd)

    passed = run(sw_dags, "sw_schema_allow_new_columns", file_path=str(path), card_id=card_id)
    assert state(passed, "replace") == "success"
    assert len(imports(datatables_conn)) == 1


def test_fail_refuses_a_new_column(sw_dags, datatables_conn, table, tmp_path, caplog, capfd):
    card_id, before = table
    path = orders_like(tmp_path, [*ORDERS, "discount"], discount=5)
    with caplog.at_level(logging.INFO):
        dag_run = run(sw_dags, "sw_schema_fail", file_path=str(path), card_id=card_id)
    assert_nothing_sent(datatables_conn, dag_run, card_id, before)
    assert "discount: added (long)" in logged(caplog, capfd)


def test_an_unchanged_schema_passes_every_check(sw_dags, datatables_conn, table, tmp_path):
    card_id, _ = table
    dag_run = run(sw_dags, "sw_schema_fail", file_path=str(orders_like(tmp_path, ORDERS)), card_id=card_id)
    assert state(dag_run, "replace") == "success"
    assert len(imports(datatables_conn)) == 1


def test_allow_checks_nothing_and_fetches_nothing(sw_dags, datatables_conn, table, tmp_path):
    card_id, _ = table
    dag_run = run(sw_dags, "sw_schema_allow", file_path=str(orders_like(tmp_path, ["order_id"])), card_id=card_id)
    assert state(dag_run, "replace") == "success"
    assert len(imports(datatables_conn)) == 1
    assert [c["ColumnName"] for c in datatables_conn_detail(datatables_conn, card_id)["Columns"]] == ["order_id"]


def test_the_check_costs_one_fetch_and_nothing_else(sw_dags, datatables_conn, table, tmp_path):
    """The same replace under "allow" (no check) and "allow_new_columns": one GET of the table more."""
    card_id, _ = table
    counts = {}
    for policy in ("allow", "allow_new_columns"):
        datatables_conn.reset_stats()
        path = orders_like(tmp_path, ORDERS, name=f"{policy}.csv")
        assert state(run(sw_dags, f"sw_schema_{policy}", file_path=str(path), card_id=card_id), "replace") == "success"
        requests = datatables_conn.stats()["requests"]
        counts[policy] = {
            "fetch": len([r for r in requests if r["method"] == "GET" and r["path"].endswith(card_id)]),
            "list": len([r for r in requests if r["method"] == "GET" and r["path"].endswith("/cards")]),
            "import": len(imports(datatables_conn)),
            "other": len([r for r in requests if r["method"] not in ("GET", "POST")]),
        }
    allow, checked = counts["allow"], counts["allow_new_columns"]
    assert checked == {**allow, "fetch": allow["fetch"] + 1}, counts


def datatables_conn_detail(emulator, card_id: str) -> dict:
    from airflow_tables.hooks.tables import DataTablesHook

    return DataTablesHook().get_card(emulator.project_id, card_id)


# -- "approve": the form, and the answer given as the api-server gives it ----------------------------


@pytest.fixture(autouse=True)
def triggerer_answers_hitl_requests(request, monkeypatch):
    """Below Airflow 3.3, let dag.test()'s in-process trigger ask for the form's answer, as the triggerer does.

    There the wait is the standard provider's ``HITLTrigger``, which asks its supervisor for the
    answer (``GetHITLDetailResponse``). The triggerer's supervisor answers it from the execution
    API; the in-process one dag.test() runs triggers under does not know the message. This adds
    the triggerer's own two lines (``triggerer_job_runner``), nothing else. On 3.3 the task waits
    in "awaiting input" and dag.test() waits with it, with no trigger.
    """
    from airflow_tables.version_compat import AIRFLOW_V_3_3_PLUS

    if AIRFLOW_V_3_3_PLUS or "sw_dags" not in request.fixturenames:
        return
    from airflow.jobs.triggerer_job_runner import HITLDetailResponseResult
    from airflow.sdk.execution_time.comms import GetHITLDetailResponse
    from airflow.sdk.execution_time.supervisor import InProcessTestSupervisor

    handle = InProcessTestSupervisor._handle_request

    def with_hitl(self, msg, log, req_id):
        if isinstance(msg, GetHITLDetailResponse):
            answer = self.client.hitl.get_detail_response(ti_id=msg.ti_id)
            return self.send_msg(HITLDetailResponseResult.from_api_response(response=answer), request_id=req_id)
        return handle(self, msg, log, req_id)

    monkeypatch.setattr(InProcessTestSupervisor, "_handle_request", with_hitl)


class Responder(threading.Thread):
    """Answers the run's approval form once it appears, as ``PATCH .../hitlDetails`` does; keeps what it saw."""

    def __init__(self, dag_id: str, answer: str | None, before_answer=None, timeout: float = 300) -> None:
        super().__init__(daemon=True)
        self.dag_id, self.answer, self.before_answer, self.timeout = dag_id, answer, before_answer, timeout
        self.form: dict | None = None
        self.error: BaseException | None = None
        self.run_ended = threading.Event()  # set by the test once dag.test() has returned
        self.run_id: str | None = None  # the run whose form was answered

    def start(self) -> None:
        # Imported here, in the test's thread: a thread importing Airflow's modules while dag.test()
        # imports them too can deadlock on the import locks.
        import airflow.api_fastapi.auth.managers.simple.user
        import airflow.api_fastapi.core_api.datamodels.hitl
        import airflow.api_fastapi.core_api.routes.public.hitl
        import airflow.jobs.scheduler_job_runner
        import airflow.models.hitl
        import airflow.models.taskinstance
        import airflow.models.trigger
        import airflow.triggers.base  # noqa: F401

        super().start()

    def run(self) -> None:
        try:
            self._answer()
            self._settle()
        except BaseException as err:  # reported by the test
            self.error = err
            end_the_wait(self.dag_id, self.run_id)  # else dag.test() would wait for ever for an answer that never comes

    def _settle(self) -> None:
        """Until dag.test() returns, resume the task each time dag.test() parks it again after the answer.

        dag.test() writes back the state its worker reported once the worker returns, so an answered
        task can find itself in "awaiting input" again at any moment after it left it (Airflow 3.3; a
        deployment's executor never does this). The answer is on record: resuming it is
        what the endpoint (or, without an answer, the scheduler's timeout sweep) does.
        """
        from airflow_tables.version_compat import AIRFLOW_V_3_3_PLUS

        if not AIRFLOW_V_3_3_PLUS:
            return
        deadline = time.monotonic() + self.timeout
        while not self.run_ended.wait(0.2):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.dag_id}: the run did not end within {self.timeout} s of the answer")
            if self.answer is None:
                sweep_timeouts()
            else:
                resume_answered(self.dag_id, self.run_id)

    def _answer(self) -> None:
        from airflow.models.hitl import HITLDetail
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.session import create_session
        from sqlalchemy import select

        deadline = time.monotonic() + self.timeout
        while True:
            with create_session() as session:
                row = session.execute(
                    select(HITLDetail, TaskInstance.run_id)
                    .join(TaskInstance, TaskInstance.id == HITLDetail.ti_id)
                    .where(TaskInstance.dag_id == self.dag_id, TaskInstance.task_id == "replace")
                    .where(HITLDetail.responded_at.is_(None))
                    # Parked (or deferred) on the form, as when a person sees it in the UI: an answer
                    # before that races the park, which only PostgreSQL's row locks order (not SQLite).
                    .where(TaskInstance.next_method == "execute_schema_approval")
                ).first()
                if row is not None:
                    detail, run_id = row
                    self.run_id = run_id
                    self.form = {"subject": detail.subject, "body": detail.body, "options": list(detail.options)}
                    break
            if time.monotonic() > deadline:
                raise TimeoutError(f"no approval form of {self.dag_id} within {self.timeout} s")
            time.sleep(0.1)
        if self.answer is None:
            return time_out(self.dag_id, run_id)
        if self.before_answer is not None:
            self.before_answer()
        respond(self.dag_id, run_id, self.answer)


def respond(dag_id: str, run_id: str, option: str, user: str = "reviewer") -> None:
    """What the api-server does for ``PATCH .../dagRuns/{run_id}/taskInstances/replace/-1/hitlDetails``."""
    import inspect

    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from airflow.api_fastapi.core_api.datamodels.hitl import UpdateHITLDetailPayload
    from airflow.api_fastapi.core_api.routes.public.hitl import update_hitl_detail
    from airflow.utils.session import create_session

    served: dict = {}
    if "dag_bag" in inspect.signature(update_hitl_detail).parameters:  # Airflow 3.4: the api-server's DAG bag
        from airflow.api_fastapi.common.dagbag import create_dag_bag

        served["dag_bag"] = create_dag_bag()
    with create_session() as session:
        update_hitl_detail(
            **served,
            dag_id=dag_id,
            dag_run_id=run_id,
            task_id="replace",
            update_hitl_detail_payload=UpdateHITLDetailPayload(chosen_options=[option]),
            user=SimpleAuthManagerUser(username=user, role="admin"),
            session=session,
            map_index=-1,
        )


def _parked(dag_id: str, run_id: str | None, session, states: tuple[str, ...] = ("awaiting_input",)):
    """The ``replace`` task of the run (of any run of ``dag_id`` when not known) waiting for its answer."""
    from airflow.models.taskinstance import TaskInstance
    from sqlalchemy import select

    query = select(TaskInstance).where(
        TaskInstance.dag_id == dag_id, TaskInstance.task_id == "replace", TaskInstance.state.in_(states)
    )
    if run_id is not None:
        query = query.where(TaskInstance.run_id == run_id)
    return session.scalars(query).first()


def resume_answered(dag_id: str, run_id: str) -> None:
    """Resume the run's parked task when its form has its answer, as the answer's endpoint does."""
    from airflow.models.hitl import HITLDetail
    from airflow.models.trigger import handle_event_submit
    from airflow.triggers.base import TriggerEvent
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        ti = _parked(dag_id, run_id, session)
        detail = None if ti is None else session.scalars(select(HITLDetail).where(HITLDetail.ti_id == ti.id)).first()
        if ti is not None and detail is not None and detail.responded_at is not None:
            handle_event_submit(TriggerEvent(detail.as_resume_event_payload()), task_instance=ti, session=session)


def sweep_timeouts() -> None:
    """The scheduler's sweep of forms past their deadline (dag.test() runs no scheduler)."""
    from airflow.jobs.job import Job
    from airflow.jobs.scheduler_job_runner import SchedulerJobRunner
    from airflow.utils.session import create_session

    with create_session() as session:
        SchedulerJobRunner(job=Job()).check_awaiting_input_timeouts(session=session)


def end_the_wait(dag_id: str, run_id: str | None) -> None:
    """Fail a task left waiting for an answer (the responder failed), so that dag.test() returns."""
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState

    with create_session() as session:
        ti = _parked(dag_id, run_id, session, ("awaiting_input", "deferred"))  # deferred on the HITL trigger below 3.3
        if ti is not None:
            ti.state = TaskInstanceState.FAILED


def time_out(dag_id: str, run_id: str) -> None:
    """On 3.3, once the deadline has passed, resolve the waiting task as the scheduler's timeout sweep does.

    dag.test() runs no scheduler; below 3.3 the trigger itself ends the wait at the deadline.
    """
    from airflow_tables.version_compat import AIRFLOW_V_3_3_PLUS

    if not AIRFLOW_V_3_3_PLUS:
        return
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        with create_session() as session:
            ti = session.scalars(
                select(TaskInstance).where(TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id)
            ).one()
            if str(ti.state) == "awaiting_input" and ti.trigger_timeout is not None:
                break
        time.sleep(0.1)
    time.sleep(1.2)  # the form's approval_timeout (1 s) passes
    sweep_timeouts()


def answered(sw_dags, dag_id: str, card_id: str, path: Path, answer: str | None, caplog, capfd, before_answer=None):
    """Run ``dag_id`` while a responder gives ``answer`` to its form (``None``: lets it time out).

    Returns the run, the form the responder saw and the run's log.
    """
    responder = Responder(dag_id, answer, before_answer=before_answer)
    responder.start()
    with caplog.at_level(logging.INFO):
        dag_run = run(sw_dags, dag_id, file_path=str(path), card_id=card_id)
    responder.run_ended.set()
    responder.join(5)
    assert responder.error is None, responder.error
    return dag_run, responder.form, logged(caplog, capfd)


def test_an_approved_change_is_sent(sw_dags, datatables_conn, table, tmp_path, caplog, capfd):
    card_id, before = table
    path = orders_like(tmp_path, ["order_id", "region", "amount"])
    dag_run, form, _ = answered(sw_dags, "sw_schema_approve", card_id, path, "Approve", caplog, capfd)
    assert form["options"] == ["Approve", "Reject"]
    assert "`note: removed`" in form["body"] and card_id in form["subject"]
    assert state(dag_run, "replace") == "success"
    assert len(imports(datatables_conn)) == 1
    assert before["credits"] - datatables_conn.credits() == 1
    columns = [c["ColumnName"] for c in datatables_conn_detail(datatables_conn, card_id)["Columns"]]
    assert columns == ["order_id", "region", "amount"]


def test_a_rejected_change_sends_nothing(sw_dags, datatables_conn, table, tmp_path, caplog, capfd):
    card_id, before = table
    path = orders_like(tmp_path, ORDERS, amount="n/a")
    dag_run, form, text = answered(sw_dags, "sw_schema_approve", card_id, path, "Reject", caplog, capfd)
    assert "`amount: long -> string`" in form["body"]
    assert_nothing_sent(datatables_conn, dag_run, card_id, before)
    assert "reviewer rejected" in text


def test_an_approval_does_not_cover_a_file_changed_after_it(sw_dags, datatables_conn, table, tmp_path, caplog, capfd):
    card_id, before = table
    header = ["order_id", "region", "amount"]
    path = orders_like(tmp_path, header)

    def change_the_file() -> None:
        orders_like(tmp_path, header, amount=99)

    dag_run, _, text = answered(
        sw_dags, "sw_schema_approve", card_id, path, "Approve", caplog, capfd, before_answer=change_the_file
    )
    assert_nothing_sent(datatables_conn, dag_run, card_id, before)
    assert "is not the one checked" in text


def test_an_unanswered_approval_sends_nothing(sw_dags, datatables_conn, table, tmp_path, caplog, capfd):
    card_id, before = table
    path = orders_like(tmp_path, ["order_id", "region", "amount"])
    dag_run, _, text = answered(sw_dags, "sw_schema_approve_unanswered", card_id, path, None, caplog, capfd)
    assert_nothing_sent(datatables_conn, dag_run, card_id, before)
    assert "nobody answered" in text


def test_new_columns_need_no_approval(sw_dags, datatables_conn, table, tmp_path):
    card_id, _ = table
    path = orders_like(tmp_path, [*ORDERS, "discount"], discount=5)
    dag_run = run(sw_dags, "sw_schema_approve", file_path=str(path), card_id=card_id)
    assert state(dag_run, "replace") == "success"
    assert len(imports(datatables_conn)) == 1


@pytest.mark.parametrize(
    ("header", "types", "expected"),
    [
        (["a", "b"], ["long", "string"], []),
        (["a", "b", "c"], ["long", "string", "long"], ["c: added (long)"]),
        (["a"], ["long"], ["b: removed"]),
        (["a", "z"], ["long", "string"], ["b: renamed to z"]),
        (["a", "z"], ["long", "long"], ["b: removed", "z: added (long)"]),
        (["a", "b"], ["string", "string"], ["a: long -> string"]),
        (["b", "a"], ["string", "long"], ["b: moved from column 2 to 1", "a: moved from column 1 to 2"]),
        (["a", "b"], None, []),
    ],
    ids=["same", "added", "removed", "renamed", "not-a-rename", "retyped", "moved", "types-unknown"],
)
def test_compare_words_each_difference(header, types, expected):
    from airflow_tables.model import Column
    from airflow_tables.operators._schema import compare

    table = [Column("a", "long"), Column("b", "string")]
    assert [str(d) for d in compare(table, header, types)] == expected


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"on_schema_change": "ask"}, "on_schema_change must be one of"),
        ({"approval_timeout": 0}, "approval_timeout must be"),
        ({"if_older": "newest"}, "if_older must be one of"),
    ],
)
def test_unknown_choices_fail_when_the_dag_is_parsed(kwargs, says):
    from airflow_tables.operators.tables import DataTablesReplaceOperator

    with pytest.raises(ValueError, match=says):
        DataTablesReplaceOperator(task_id="t", card_id="CRD-x", file_path="f.csv", **kwargs)


def test_the_form_shows_a_hostile_heading_as_text_not_markdown(
    sw_dags, datatables_conn, table, tmp_path, caplog, capfd
):
    """Issue 36 point 12: a file's producer writes Markdown into a column name; the reviewer sees it as written.

    The body is rendered as CommonMark (markdown-it-py, as the UI's renderer reads it): no heading,
    no link, no image and no HTML comes out of any value put in it.
    """
    from markdown_it import MarkdownIt

    card_id, before = table
    hostile = "## Safe to approve\n<img src=x> ![i](http://e.test/i.png) [ok](http://e.test) `` ` ``"
    path = orders_like(tmp_path, ["order_id", "region", "amount", hostile])
    dag_run, form, _ = answered(sw_dags, "sw_schema_approve", card_id, path, "Reject", caplog, capfd)

    html = MarkdownIt("commonmark").render(form["body"])
    assert "<h" not in html.replace("<hr", "") and "<a " not in html and "<img" not in html
    assert re.search(r"<code>[^<]*## Safe to approve &lt;img src=x&gt; !\[i\]\(http://e.test/i.png\) \[ok\]", html)
    assert_nothing_sent(datatables_conn, dag_run, card_id, before)
