"""Every validation test runs once with each fast-path kernel (csv_fastpath): they must agree.

``native`` is the C extension (built by ``make setup`` where a C compiler exists),
``python`` the pure-Python fallback. Child processes (the CLI, the second half of a
large file's scan) inherit the choice through the environment.
"""

from __future__ import annotations

import pytest

from airflow_tables import csv_fastpath


@pytest.fixture(params=["native", "python"], autouse=True)
def scan_kernel(request, monkeypatch):
    if request.param == "native":
        if not csv_fastpath.native_available():
            pytest.skip("the C extension is not built here (see test_native_kernel_is_built)")
        monkeypatch.delenv(csv_fastpath.PURE_PYTHON_ENV, raising=False)
    else:
        monkeypatch.setenv(csv_fastpath.PURE_PYTHON_ENV, "1")
    assert csv_fastpath.kernel(",", 2).name == request.param
    return request.param
