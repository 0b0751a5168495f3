from tests.operators.conftest import datatables_conn  # noqa: F401  (temporary, until the root conftest has it)
