"""How long the emulator takes to read an upload, against ``validate_csv`` on the same file.

    .venv/bin/python benchmarks/emulator_read.py [--sizes 512] [--columns 20 300] [--repeat 3]

Target (issue 3): reading a 512 MiB upload takes <= 2x ``validate_csv`` on the same
file, with the server's memory bounded (the same peak for every size given). Run it by hand on a quiet machine; it needs
``curl`` (the fastest client, so the client is not what is measured) and about
twice the largest file size free in the temporary directory.

For each file, alternating, ``--repeat`` times:

* ``validate``: ``validate_csv(path)`` timed inside its own process (interpreter
  start-up excluded, so the anchor is as fast as it gets);
* ``upload``: an import the server refuses after receiving it whole (415, the file
  part sent as ``text/plain``): the time to move the bytes to the server's disk;
* ``ready``: a real import, from the first byte sent until the list shows
  ``Processed`` true (polled every 10 ms);
* ``reading`` = ``ready - upload``: the server's own work on the file, i.e. the
  synchronous check at upload (the full structural scan) plus the background
  reading (the profile of a bounded sample). This is the figure held to <= 2x.

The server's peak resident memory (VmHWM) is read from /proc after the runs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row, csv_file, machine, python, write_rows  # noqa: E402

from airflow_tables.emulator.testing import EmulatorProcess  # noqa: E402

VALIDATE = (
    "import sys, time\n"
    "from airflow_tables.validation import validate_csv\n"
    "t = time.perf_counter(); r = validate_csv(sys.argv[1]); s = time.perf_counter() - t\n"
    "print(s, r.rows, r.ok)"
)
TARGET = 2.0


def validate_seconds(path: Path) -> tuple[float, int]:
    out = subprocess.run([python(), "-c", VALIDATE, str(path)], capture_output=True, text=True, check=True).stdout
    seconds, rows, ok = out.split()
    if ok != "True":
        raise RuntimeError(f"{path} does not validate")
    return float(seconds), int(rows)


def curl_import(emu: EmulatorProcess, path: Path, media_type: str) -> tuple[float, int, dict]:
    """POST the file with curl; return (seconds, status, body)."""
    started = time.perf_counter()
    out = subprocess.run(
        [
            "curl", "-sS", "--noproxy", "*", "-w", "\n%{http_code}",
            "-H", f"X-API-Key: {emu.api_key}",
            "-F", f"ProjectID={emu.project_id}",
            "-F", f"File=@{path};type={media_type}",
            f"{emu.base_url}/v1.0/data/import",
        ],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    seconds = time.perf_counter() - started
    body, _, status = out.rpartition("\n")
    return seconds, int(status), json.loads(body)


def wait_processed(emu: EmulatorProcess, card_id: str, timeout: float = 600) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        card = next(c for c in emu.list_cards() if c["CardID"] == card_id)
        if card["Processed"]:
            return card
        if time.monotonic() > deadline:
            raise TimeoutError(card_id)
        time.sleep(0.01)


def peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(path: Path, expected_rows: int, repeat: int) -> dict:
    runs: dict[str, list[float]] = {"validate": [], "upload": [], "ready": [], "reading": []}
    with EmulatorProcess() as emu:
        start_peak = peak_mib(emu.process.pid)
        for _ in range(repeat):
            seconds, rows = validate_seconds(path)
            if rows != expected_rows:
                raise RuntimeError(f"validate_csv counted {rows} rows, expected {expected_rows}")
            runs["validate"].append(seconds)
            upload, status, body = curl_import(emu, path, "text/plain")
            if status != 415:
                raise RuntimeError(f"the refused upload answered {status}: {body}")
            started = time.perf_counter()
            _, status, body = curl_import(emu, path, "text/csv")
            if status != 200:
                raise RuntimeError(f"the import answered {status}: {body}")
            card = wait_processed(emu, body["CardID"])
            ready = time.perf_counter() - started
            if card["Rows"] != expected_rows or not card["SuccessfulUpload"]:
                raise RuntimeError(f"the emulator read {card}")
            runs["upload"].append(upload)
            runs["ready"].append(ready)
            runs["reading"].append(ready - upload)
            emu.request("DELETE", f"/v1.0/projects/{emu.project_id}/cards/{body['CardID']}", key=emu.api_key)
        result = {name: statistics.median(values) for name, values in runs.items()}
        result["start_peak_mib"] = start_peak
        result["peak_mib"] = peak_mib(emu.process.pid)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[512], help="file sizes in MiB")
    parser.add_argument("--columns", type=int, nargs="+", default=[20, 300])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", help="also write the report's rows here (for run_all.py)")
    args = parser.parse_args(argv)
    if shutil.which("curl") is None:
        print("this benchmark needs curl", file=sys.stderr)
        return 2
    print(f"machine: {machine()}")
    print(
        f"{'file':<26} {'validate s':>10} {'upload s':>9} {'ready s':>8} {'reading s':>10} "
        f"{'reading/validate':>17} {'server peak MiB':>16}"
    )
    failures = []
    report: list[Row] = []
    peaks: dict[int, list[float]] = {}
    for columns in args.columns:
        for size in args.sizes:
            path, rows = csv_file(columns, size)
            r = measure(path, rows, args.repeat)
            ratio = r["reading"] / r["validate"]
            print(
                f"{path.name:<26} {r['validate']:>10.2f} {r['upload']:>9.2f} {r['ready']:>8.2f} {r['reading']:>10.2f} "
                f"{ratio:>16.2f}x {r['peak_mib']:>8.1f} (idle {r['start_peak_mib']:.0f})"
            )
            report.append(
                Row(
                    "emulator reading",
                    f"{columns} cols, {size} MiB, upload to Processed minus transfer, vs validate_csv",
                    f"{r['reading']:.2f} s",
                    f"{r['validate']:.2f} s",
                    ratio,
                    f"server {r['peak_mib']:.0f} MiB",
                    f"<= {TARGET}x" if size >= 512 else "",
                    ratio <= TARGET if size >= 512 else None,
                )
            )
            if size >= 512 and ratio > TARGET:  # smaller files show the fixed cost of the sample
                failures.append(f"{path.name}: reading {ratio:.2f}x validate_csv (target <= {TARGET}x)")
            peaks.setdefault(columns, []).append(r["peak_mib"])
    for columns, ps in peaks.items():
        if max(ps) - min(ps) > 16:
            failures.append(f"{columns} cols: server peak memory grows with the file: {ps}")
    print("targets: " + ("all met" if not failures else "MISSED: " + "; ".join(failures)))
    write_rows(args.json, report)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
