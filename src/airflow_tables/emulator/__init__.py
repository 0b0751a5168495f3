"""A local, persistent, spec-faithful emulator of the Data Tables Service.

Start it with ``airflow-tables-emulator --data-dir DIR`` (see ``--help`` and
``docs/emulator.md``). It is the other side of the wire from the hook: it never
imports the hook, the operators or Airflow, so the two cannot agree on the same
mistake. It reads files through :mod:`airflow_tables.validation`: the
rules and the scan the validator uses.

Modules, one job each:

* :mod:`.config`: keys, organisations, departments, connector tables, limits.
* :mod:`.store`: the SQLite metadata and the files under the data directory.
* :mod:`.multipart`: the import request, streamed to disk.
* :mod:`.profile`: what a file's values say (types, descriptions).
* :mod:`.reader`: background reading, resumed after a restart.
* :mod:`.api`: the ``/v1.0`` endpoints and their status codes.
* :mod:`.faults` and :mod:`.controls`: test controls, mounted only on request.
* :mod:`.app`: puts them together; :mod:`.__main__`: the command line.
* :mod:`.testing`: a standard-library helper that runs the emulator for tests.

Importing this package imports nothing else, so ``testing`` stays cheap.
"""

from __future__ import annotations
