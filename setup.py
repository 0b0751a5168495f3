"""The optional C extension; everything else is in pyproject.toml.

``airflow_tables._speedups`` makes the CSV scan about three times faster
(``benchmarks/validate.py``). It is optional: where it cannot be compiled (no C compiler,
an unusual platform) setuptools warns and installs the package without it, and
``airflow_tables.csv_fastpath`` falls back to its pure-Python kernel, which gives the
same answers.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "airflow_tables._speedups",
            sources=["src/airflow_tables/_speedups.c"],
            optional=True,
        )
    ]
)
