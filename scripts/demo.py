"""The README's first command: show what airflow-tables does, offline.

For now it runs the pre-upload validator on the sample file the example DAGs use;
the end-to-end demo (emulator + a real Airflow DAG run) replaces it once the
operators exist.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    sample = ROOT / "dags" / "data" / "orders.csv"
    print("airflow-tables demo: validating the sample file the example DAGs upload\n")
    return subprocess.call([sys.executable, "-m", "airflow_tables.cli", "validate", str(sample)])


if __name__ == "__main__":
    sys.exit(main())
