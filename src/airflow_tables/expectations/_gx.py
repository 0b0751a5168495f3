"""Great Expectations, imported only when a task has a suite, with a clear error when it is not installed.

GX is slow and large to import, so nothing imports it at DAG parse time. It is
an optional extra of this provider; a task given ``expectations=`` on a worker without it
fails saying which package to install, not with a bare ``ModuleNotFoundError``.
"""

from __future__ import annotations

import logging
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from great_expectations.core.batch_definition import BatchDefinition
    from great_expectations.data_context import AbstractDataContext

INSTALL = "pip install 'airflow-tables[gx]'"
#: Logs ~200 "Skipping registering function ..." INFO lines while GX is imported.
_NOISY_LOGGER = "great_expectations._docs_decorators"


class ExpectationsError(Exception):
    """The suite cannot be checked on this file: GX is missing, the suite is malformed, or names a missing column.

    Not a failed expectation: nothing was validated, and trying again would not help.
    """


def import_gx() -> ModuleType:
    """``great_expectations``, imported quietly; :class:`ExpectationsError` naming the extra when it is absent."""
    noisy = logging.getLogger(_NOISY_LOGGER)
    if noisy.level == logging.NOTSET:  # a level the user set on purpose is left alone
        noisy.setLevel(logging.WARNING)
    try:
        import great_expectations
    except ModuleNotFoundError as err:
        if (err.name or "").partition(".")[0] != "great_expectations":
            raise  # GX is there but one of its own dependencies is not: that error says which
        raise ExpectationsError(
            f"expectations= needs Great Expectations, which is not installed where this task runs: {INSTALL}"
        ) from None
    return great_expectations


def ephemeral_context(gx: ModuleType) -> AbstractDataContext:
    """An in-memory GX context (nothing written to disk), without progress bars in the task log."""
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = {"globally": False}
    return context


def dataframe_batches(context: AbstractDataContext, file_name: str) -> BatchDefinition:
    """A batch definition that validates whatever DataFrame it is given; results name the file."""
    return (
        context.data_sources.add_pandas("airflow_tables")
        .add_dataframe_asset(file_name)
        .add_batch_definition_whole_dataframe("file")
    )
