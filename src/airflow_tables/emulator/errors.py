"""The one exception that becomes an error response.

Storage, the import parser and the endpoints all refuse requests by raising
:class:`ApiError`; :mod:`.api` turns it into the seed's envelope
(``{"Msg": ..., "ExecTime": ...}``) in one place, so a status code and its body
can never drift apart.
"""

from __future__ import annotations


class ApiError(Exception):
    """Refuse the request with ``status`` and a ``Msg`` that says what to fix."""

    def __init__(self, status: int, msg: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(msg)
        self.status = status
        self.msg = msg
        self.headers = headers or {}
