"""The ids a request names, a department's ``ProjectID`` and a table's ``CardID``: their shape, checked once.

One check of each id for the hook, the tasks, the triggers and the operators alike (each
says what is wrong in one sentence, before any request), and the one way an id becomes a
path segment, so that ``/``, ``?`` or ``%2F`` in a value cannot change the URL.
"""

from __future__ import annotations

import re
from urllib.parse import quote

CARD_ID = re.compile(r"CRD-[0-9A-Za-z][0-9A-Za-z_-]*\Z")


def segment(value: str, name: str) -> str:
    """Percent-encode an id as one path segment, so ``/``, ``?``, ``#``, ``%2F`` cannot change the URL."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string (an id), not {type(value).__name__} {value!r}.")
    if not value.strip() or value in (".", ".."):
        raise ValueError(f"{name} must be a non-empty id, not {value!r}.")
    return quote(value, safe="")


def card_id_problem(card_id: object) -> str | None:
    """What is wrong with a CardID's shape (``CRD-`` and a UUID-like token), or ``None``: no request needed."""
    if card_id is None or card_id == "":
        return "card_id is empty: name the table to use (a CardID such as 'CRD-...')"
    if not isinstance(card_id, str):
        return f"card_id must be a CardID string such as 'CRD-...', not {type(card_id).__name__} {card_id!r}"
    if card_id.strip() in ("None", "null"):
        return (
            f"card_id is {card_id!r}, not a CardID: the value it was rendered from was empty "
            "(an XCom or param with no value?)"
        )
    if card_id != card_id.strip():
        return f"card_id {card_id!r} has white space around it (a CardID has none)"
    if card_id[:4].upper() == "CRD-" and card_id[:4] != "CRD-":
        return f"card_id {card_id!r} must start with upper-case 'CRD-' (CardIDs are case-sensitive)"
    if not CARD_ID.match(card_id):
        return f"card_id {card_id!r} is not a CardID: the service's ids are 'CRD-' followed by a UUID"
    return None


def project_id_problem(project_id: object) -> str | None:
    """What is wrong with a ``project_id`` given explicitly (not left out), or ``None``.

    The one check of a department's id, for the hook, the tasks and the triggers alike. An
    empty value, white space or the text ``"None"`` is what a template that found nothing
    renders: it is refused, never read as "the connection's default" (that would import into
    another department) nor sent as a department called ``None``.
    """
    if isinstance(project_id, bool) or not isinstance(project_id, (str, int)):
        return f"project_id must be a string (a department's ProjectID), not {type(project_id).__name__} {project_id!r}"
    text = str(project_id).strip()
    if not text or text == "None":
        return (
            f"project_id is {project_id!r}, which names no department (a template that rendered nothing?): name a "
            "department, or leave project_id out to use the connection's project_id extra"
        )
    if text in (".", ".."):
        return f"project_id is {project_id!r}, not a department's ProjectID"
    return None


def checked_project_id(project_id: object) -> str:
    """``project_id`` as the department's id (surrounding white space removed), or ``ValueError`` naming the problem."""
    problem = project_id_problem(project_id)
    if problem is not None:
        raise ValueError(problem)
    return str(project_id).strip()


def card_segment(card_id: str) -> str:
    """Check the shape the service gives CardIDs, then encode it as a path segment."""
    problem = card_id_problem(card_id)
    if problem is not None:
        raise ValueError(problem)
    return segment(card_id, "card_id")
