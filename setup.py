"""The optional C extensions; everything else is in pyproject.toml.

``airflow_tables.validation._speedups`` makes the CSV scan faster (measured in
``benchmarks/validate.py``); ``airflow_tables.sources._transcode`` converts single-byte code pages
(Windows-1252, Latin-1...) to UTF-8 faster than Python's codecs (measured in
``benchmarks/sources.py``). Both are optional: where they cannot be compiled (no C compiler,
an unusual platform) setuptools warns and installs the package without them, and
``airflow_tables.validation.kernels`` and ``airflow_tables.sources.transcode`` fall back to pure
Python, which gives the same answers.
"""

import os

from setuptools import Extension, setup

# setuptools writes the project's metadata (``airflow_tables.egg-info``) beside the package by
# default, that is into ``src/``, which an editable install puts on ``sys.path``: Airflow then
# finds the distribution twice (its site-packages ``.dist-info`` and that folder) and registers
# the plugin twice ("Plugin 'datatables' already registered"). Build metadata goes to ``build/``.
EGG_BASE = "build"
os.makedirs(EGG_BASE, exist_ok=True)

setup(
    options={"egg_info": {"egg_base": EGG_BASE}},
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
