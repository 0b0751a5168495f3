"""What the hook keeps for one minor release only: each method warns, naming its replacement, and goes in 0.4.

Kept apart, so that what is going is listed in one place (docs/versioning.md: a deprecation
warns for one minor release before the name is removed), with the one warning every deprecated
name of the hooks package gives (:func:`warn_deprecated`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING

from airflow_tables.exceptions import DataTablesNotFoundError
from airflow_tables.model import by_card_id, missing_from

if TYPE_CHECKING:
    from airflow_tables.model import TableDetail, TableSummary


def warn_deprecated(old: str, new: str) -> None:
    """Warn that ``old`` goes in the next minor release, naming ``new``; called by the deprecated name itself."""
    import warnings

    from airflow.exceptions import AirflowProviderDeprecationWarning

    warnings.warn(
        f"{old} is deprecated and will be removed in the next minor release of airflow-tables; use {new} instead.",
        AirflowProviderDeprecationWarning,
        stacklevel=3,
    )


class DeprecatedMethods:
    """The hook's deprecated methods (see the module)."""

    if TYPE_CHECKING:  # what the hook provides

        async def a_tables(self, project_id: str | None = None) -> list[TableSummary]: ...
        async def a_table(self, project_id: str | None, card_id: str) -> TableDetail: ...
        def tables_named_after(self, project_id: str | None, file_name: str) -> list[str]: ...

    async def a_find_cards(self, project_id: str | None, card_ids: Iterable[str]) -> dict[str, dict]:
        """:meth:`find_cards` without blocking the event loop. Deprecated: use :meth:`a_tables` and :meth:`a_table`."""
        warn_deprecated(
            "DataTablesHook.a_find_cards", "DataTablesHook.a_tables() (and a_table() for a table the list lacks)"
        )
        tables = by_card_id(await self.a_tables(project_id))
        for card_id in missing_from(tables, card_ids):
            with contextlib.suppress(DataTablesNotFoundError):
                tables[card_id] = (await self.a_table(project_id, card_id)).summary
        return {card_id: table.to_json() for card_id, table in tables.items()}

    def find_lost_import(self, project_id: str | None, file_name: str, before: Collection[str]) -> list[str]:
        """Deprecated: the tables named after ``file_name`` that are new since ``before``.

        A name is no evidence that an import made a table (another file of that name may have);
        :class:`~airflow_tables.hooks.send_once.SendOnce` adopts a lost import only on evidence.
        """
        warn_deprecated(
            "DataTablesHook.find_lost_import (a table named after the file is no evidence that the import made it)",
            "import_csv inside a task, or the operators: a lost import is adopted on evidence "
            "(airflow_tables.hooks.send_once.SendOnce)",
        )
        return [card_id for card_id in self.tables_named_after(project_id, file_name) if card_id not in before]
