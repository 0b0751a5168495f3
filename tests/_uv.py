"""Where the tests find uv: on PATH, or where scripts/setup.sh installs it (~/.local/bin)."""

from __future__ import annotations

import shutil
from pathlib import Path


def uv_command() -> str | None:
    found = shutil.which("uv") or str(Path.home() / ".local" / "bin" / "uv")
    return found if Path(found).exists() else None
