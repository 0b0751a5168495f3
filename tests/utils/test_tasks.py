"""utils/tasks.py: what every Data Tables task has, and the one sentence a wrong argument fails with."""

from __future__ import annotations

import pytest

from airflow_tables.utils.tasks import DataTablesTaskMixin, check_card_id
from airflow_tables.version_compat import AirflowFailException

CARD = "CRD-0b6f3c1e-5d2a-4c1b-9a8e-1f2d3c4b5a69"


class Task(DataTablesTaskMixin):
    def __init__(self, project_id: object) -> None:
        self.task_id = "t"
        self.datatables_conn_id = "no_such_connection"  # a department that is checked never reads it
        self.project_id = project_id  # type: ignore[assignment]


@pytest.mark.parametrize("project_id", ["", "  ", "None", "None\n"])
def test_a_project_id_that_rendered_nothing_fails_with_the_hooks_sentence(project_id):
    """Issue 39 point 4: the task's check is the hook's (one sentence), wrapped in the task's refusal."""
    from airflow_tables.hooks._ids import project_id_problem

    with pytest.raises(AirflowFailException) as refused:
        Task(project_id).department  # noqa: B018
    assert str(refused.value) == f"t: {project_id_problem(project_id)}; nothing was sent."
    assert "which names no department" in str(refused.value)


def test_a_project_id_is_the_department_without_surrounding_white_space():
    assert Task(" PRJ-1\n").department == "PRJ-1"
    assert Task(7).department == "7"


def test_a_card_id_is_refused_with_the_same_sentence_as_any_argument():
    from airflow_tables.hooks._ids import card_id_problem

    assert check_card_id("t", CARD) == CARD
    for card_id in ("", "None", "crd-1", None):
        with pytest.raises(AirflowFailException) as refused:
            check_card_id("t", card_id)
        assert str(refused.value) == f"t: {card_id_problem(card_id)}; nothing was sent."
