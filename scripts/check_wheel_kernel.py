"""Check an installed airflow-tables wheel's native CSV kernel: present, and agreeing with the pure-Python one.

cibuildwheel runs this against every wheel it builds (``[tool.cibuildwheel] test-command``
in pyproject.toml), from a temporary directory, so the package imported is the wheel's,
never the source tree's. It needs nothing but the wheel: no Airflow, no network.

    python scripts/check_wheel_kernel.py      exit 0, or 1 naming what is wrong
"""

from __future__ import annotations

import sys


def main() -> int:
    from airflow_tables.validation import kernels

    if not kernels.native_available():
        print("the wheel has no native kernel (airflow_tables.validation._speedups did not import)", file=sys.stderr)
        return 1
    rows = [b"id,name,note"] + [b'%d,"row %d","a, quoted ""note"""' % (i, i) for i in range(5000)]
    data = memoryview(b"\r\n".join(rows) + b"\r\n\xff,broken,row\r\n")
    native = kernels.NativeKernel(",", 3).scan(data, True)
    python = kernels.PythonKernel(",", 3).scan(data, True)
    if native != python:
        print(f"the kernels disagree: native {native}, pure-Python {python}", file=sys.stderr)
        return 1
    print(f"native kernel agrees with the pure-Python kernel: {native}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
