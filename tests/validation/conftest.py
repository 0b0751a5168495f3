"""Every validation test runs once with each fast-path kernel (validation/kernels.py): they must agree.

``native`` is the C extension (built by ``make setup`` where a C compiler exists),
``python`` the pure-Python fallback. Child processes (the CLI, the second half of a
large file's scan) inherit the choice through the environment.
"""

from __future__ import annotations

import tempfile

import pytest

from airflow_tables.validation import kernels


@pytest.fixture(params=["native", "python"], autouse=True)
def scan_kernel(request, monkeypatch):
    if request.param == "native":
        if not kernels.native_available():
            pytest.skip("the C extension is not built here (see test_native_kernel_is_built)")
        monkeypatch.delenv(kernels.PURE_PYTHON_ENV, raising=False)
    else:
        monkeypatch.setenv(kernels.PURE_PYTHON_ENV, "1")
    assert kernels.kernel(",", 2).name == request.param
    return request.param


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """The system temp directory, private to the test, so that whatever a quarantine leaves there is seen."""
    folder = tmp_path / "system-tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder
