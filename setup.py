"""The optional C extensions; everything else is in pyproject.toml.

``airflow_tables.validation._speedups`` makes the CSV scan faster (measured in
``benchmarks/validate.py``); ``airflow_tables.sources._transcode`` converts single-byte code pages
(Windows-1252, Latin-1...) to UTF-8 faster than Python's codecs (measured in
``benchmarks/sources.py``). Both are optional: where they cannot be compiled (no C compiler,
an unusual platform) setuptools warns and installs the package without them, and
``airflow_tables.validation.kernels`` and ``airflow_tables.sources.transcode`` fall back to pure
Python, which gives the same answers.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "airflow_tables.validation._speedups",
            sources=["src/airflow_tables/validation/_speedups.c"],
            optional=True,
        ),
        Extension(
            "airflow_tables.sources._transcode",
            sources=["src/airflow_tables/sources/_transcode.c"],
            optional=True,
        ),
    ]
)
