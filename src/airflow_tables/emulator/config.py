"""Who may do what, and with how many credits: the emulator's configuration.

The seed leaves the permission model open ("how keys are issued, scoped or
revoked: not shown"), so the emulator's is the smallest one that exercises every
rule it does state: an API key belongs to one organisation (whose credits its
imports spend) and has a role per department: ``manage`` (list, fetch, import,
delete) or ``read`` (list, fetch). Departments a key has no role in are invisible
to it (403). Connector tables are declared here because nothing in the interface
creates them.

The file is JSON, or TOML when its name ends in ``.toml`` and :mod:`tomllib`
exists (Python 3.11+)::

    {
      "organisations": {"acme": {"credits": 1000}},
      "departments": {"PRJ-sales": {"name": "Sales", "domain": "Sales"}},
      "api_keys": [
        {"key": "dtk_...", "organisation": "acme", "manage": ["PRJ-sales"], "read": ["PRJ-hr"]}
      ],
      "connectors": [
        {"project_id": "PRJ-sales", "name": "Accounts", "source": "Salesforce", "status": "active",
         "card_id": "CRD-...", "rows": 1200, "columns": {"AccountId": "string", "Employees": "long"}}
      ],
      "limits": {"max_bytes": 536870912, "max_columns": 300},
      "timeouts": {"keep_alive": 5, "request_headers": 10, "body": 600, "body_idle": 60},
      "capacity": {"open_uploads": 64}
    }

With no ``--config`` and no ``config.json`` in the data directory, a first run
writes one there with a fresh key, department and organisation, and prints them.
"""

from __future__ import annotations

import dataclasses
import json
import re
import secrets
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_tables.validation import rules

DEFAULT_CREDITS = 100
DEFAULT_DOMAIN = "General"
CONNECTOR_STATUSES = ("active", "paused")
DATA_TYPES = ("long", "string")
#: The shape of a CardID: ``CRD-`` and a UUID.
CARD_ID = re.compile(r"CRD-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
#: Namespace of the CardIDs derived for connector tables that the config gives no id.
_CONNECTOR_NS = uuid.UUID("6f1c2a52-8f5e-4c4b-9a59-3f0f7f3b2d10")


class ConfigError(ValueError):
    """The configuration cannot be used; the message names the field and what to write instead."""


@dataclass(frozen=True)
class ApiKey:
    """A caller: its organisation pays for its imports; ``manage`` implies ``read``."""

    key: str
    organisation: str
    manage: frozenset[str]
    read: frozenset[str]

    def role(self, project_id: str) -> str | None:
        if project_id in self.manage:
            return "manage"
        if project_id in self.read:
            return "read"
        return None


@dataclass(frozen=True)
class Department:
    project_id: str
    name: str
    domain: str = DEFAULT_DOMAIN


@dataclass(frozen=True)
class Connector:
    """A table fed by a connected system; ``LockedFromDelete`` is true while ``status`` is active."""

    card_id: str
    project_id: str
    name: str
    source: str
    status: str
    domain: str
    rows: int
    columns: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Timeouts:
    """How long the server waits for a client, in seconds, so no silent or slow client holds a connection for ever.

    ``keep_alive``: an idle connection between requests. ``request_headers``: from connecting
    (or the first byte of a next request) to the end of the request's headers. ``body``: the
    whole body of an import, 512 MiB at under 1 MB/s; ``body_idle``: no byte of it for this long.
    """

    keep_alive: float = 5.0
    request_headers: float = 10.0
    body: float = 600.0
    body_idle: float = 60.0


@dataclass(frozen=True)
class Capacity:
    """How much the server takes on at once, so that many slow clients cannot pile up without bound.

    ``open_uploads``: import bodies being received at the same time. One more is answered 429
    with ``Retry-After`` before a byte of its body is read: nothing is kept and no credit spent.
    64 is twice Airflow's default ``[core] parallelism``, so one Airflow's imports never meet it.
    """

    open_uploads: int = 64


@dataclass
class EmulatorConfig:
    """Everything the server needs; built by :func:`load` from the command line and the file."""

    data_dir: Path
    organisations: dict[str, int] = field(default_factory=dict)
    departments: dict[str, Department] = field(default_factory=dict)
    api_keys: dict[str, ApiKey] = field(default_factory=dict)
    connectors: list[Connector] = field(default_factory=list)
    limits: rules.Limits = rules.SERVICE_LIMITS
    timeouts: Timeouts = Timeouts()
    capacity: Capacity = Capacity()
    host: str = "127.0.0.1"
    port: int = 8765
    test_controls: bool = False
    processing_delay: float = 0.0
    config_path: Path | None = None

    def department(self, project_id: str) -> Department:
        return self.departments.get(project_id) or Department(project_id, project_id)


def read_file(path: Path) -> dict:
    """Parse a JSON or TOML configuration file into a dict, with a clear error."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"cannot read the configuration file {path}: {err.strerror or err}") from err
    if path.suffix.lower() == ".toml":
        import tomllib

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise ConfigError(f"{path}: not valid TOML: {err}") from err
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ConfigError(f"{path}: not valid JSON: {err}") from err
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the configuration must be an object at the top level")
    return data


def default_data() -> dict:
    """A fresh ready-to-use configuration: one organisation, one department, one managing key."""
    project_id = f"PRJ-{secrets.token_hex(4)}"
    return {
        "organisations": {"local": {"credits": DEFAULT_CREDITS}},
        "departments": {project_id: {"name": "Local department", "domain": DEFAULT_DOMAIN}},
        "api_keys": [{"key": f"dtk_{secrets.token_urlsafe(24)}", "organisation": "local", "manage": [project_id]}],
        "connectors": [],
    }


def connector_card_id(project_id: str, name: str) -> str:
    """The stable CardID of a connector table the config gives no ``card_id``."""
    return f"CRD-{uuid.uuid5(_CONNECTOR_NS, project_id + '/' + name)}"


def _expect(value: Any, kind: type | tuple[type, ...], where: str, what: str) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ConfigError(f"{where} must be {what}, not {json.dumps(value, default=str)}")
    return value


def _no_extra(data: dict, allowed: set[str], where: str) -> None:
    extra = sorted(set(data) - allowed)
    if extra:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(extra)}; allowed: {', '.join(sorted(allowed))}")


def _string_list(value: Any, where: str) -> frozenset[str]:
    _expect(value, list, where, "a list of ProjectIDs")
    return frozenset(_expect(v, str, f"{where}[{i}]", "a ProjectID string") for i, v in enumerate(value))


def parse(data: dict, config: EmulatorConfig, source: str = "configuration") -> EmulatorConfig:
    """Fill ``config`` from a parsed file, checking every field; raises :class:`ConfigError`."""
    sections = {"organisations", "departments", "api_keys", "connectors", "limits", "timeouts", "capacity"}
    _no_extra(data, sections, source)
    for name, org in _expect(data.get("organisations", {}), dict, "organisations", "an object").items():
        where = f"organisations.{name}"
        _no_extra(_expect(org, dict, where, 'an object like {"credits": 100}'), {"credits"}, where)
        credits = _expect(org.get("credits", DEFAULT_CREDITS), int, f"{where}.credits", "a whole number")
        if credits < 0:
            raise ConfigError(f"{where}.credits must be 0 or more, not {credits}")
        config.organisations[name] = credits
    for project_id, dept in _expect(data.get("departments", {}), dict, "departments", "an object").items():
        where = f"departments.{project_id}"
        _no_extra(_expect(dept, dict, where, "an object"), {"name", "domain"}, where)
        config.departments[project_id] = Department(
            project_id,
            _expect(dept.get("name", project_id), str, f"{where}.name", "a string"),
            _expect(dept.get("domain", DEFAULT_DOMAIN), str, f"{where}.domain", "a string"),
        )
    for i, entry in enumerate(_expect(data.get("api_keys", []), list, "api_keys", "a list")):
        _parse_key(entry, f"api_keys[{i}]", config)
    for i, entry in enumerate(_expect(data.get("connectors", []), list, "connectors", "a list")):
        _parse_connector(entry, f"connectors[{i}]", config)
    limits = _expect(data.get("limits", {}), dict, "limits", "an object")
    _no_extra(limits, {"max_bytes", "max_columns"}, "limits")
    try:
        config.limits = rules.Limits(
            max_columns=_expect(
                limits.get("max_columns", config.limits.max_columns), int, "limits.max_columns", "a number"
            ),
            max_bytes=_expect(limits.get("max_bytes", config.limits.max_bytes), int, "limits.max_bytes", "bytes"),
        )
    except ValueError as err:
        raise ConfigError(f"limits.{err}") from None
    config.timeouts = _parse_timeouts(_expect(data.get("timeouts", {}), dict, "timeouts", "an object"), config.timeouts)
    capacity = _expect(data.get("capacity", {}), dict, "capacity", "an object")
    _no_extra(capacity, {"open_uploads"}, "capacity")
    open_uploads = capacity.get("open_uploads", config.capacity.open_uploads)
    if isinstance(open_uploads, bool) or not isinstance(open_uploads, int) or open_uploads < 1:
        raise ConfigError(f"capacity.open_uploads must be a whole number of 1 or more, not {json.dumps(open_uploads)}")
    config.capacity = Capacity(open_uploads=open_uploads)
    if not config.api_keys:
        raise ConfigError(f"{source}: no api_keys; nobody could call the service")
    return config


def _parse_timeouts(data: dict, timeouts: Timeouts) -> Timeouts:
    _no_extra(data, {f.name for f in dataclasses.fields(Timeouts)}, "timeouts")
    for name, value in data.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ConfigError(f"timeouts.{name} must be a number of seconds above 0, not {json.dumps(value)}")
    return dataclasses.replace(timeouts, **{name: float(value) for name, value in data.items()})


def _parse_key(entry: Any, where: str, config: EmulatorConfig) -> None:
    _expect(entry, dict, where, "an object with key, organisation, manage and read")
    _no_extra(entry, {"key", "organisation", "manage", "read"}, where)
    key = _expect(entry.get("key"), str, f"{where}.key", "a non-empty string")
    if not key.strip() or key in config.api_keys:
        raise ConfigError(f"{where}.key must be non-empty and unique")
    org = _expect(entry.get("organisation"), str, f"{where}.organisation", "an organisation name")
    if org not in config.organisations:
        raise ConfigError(f"{where}.organisation {org!r} is not listed under organisations")
    manage = _string_list(entry.get("manage", []), f"{where}.manage")
    read = _string_list(entry.get("read", []), f"{where}.read")
    for project_id in manage | read:
        config.departments.setdefault(project_id, Department(project_id, project_id))
    config.api_keys[key] = ApiKey(key, org, manage, read | manage)


def _parse_connector(entry: Any, where: str, config: EmulatorConfig) -> None:
    allowed = {"card_id", "project_id", "name", "source", "status", "domain", "rows", "columns"}
    _no_extra(_expect(entry, dict, where, "an object"), allowed, where)
    project_id = _expect(entry.get("project_id"), str, f"{where}.project_id", "a ProjectID")
    name = _expect(entry.get("name"), str, f"{where}.name", "the table's name")
    status = entry.get("status", "active")
    if status not in CONNECTOR_STATUSES:
        raise ConfigError(f"{where}.status must be 'active' or 'paused', not {status!r}")
    columns = _expect(entry.get("columns", {"id": "long", "name": "string"}), dict, f"{where}.columns", "an object")
    for col, dtype in columns.items():
        if dtype not in DATA_TYPES:
            raise ConfigError(f"{where}.columns.{col} must be 'long' or 'string', not {dtype!r}")
    dept = config.departments.setdefault(project_id, Department(project_id, project_id))
    card_id = _expect(entry.get("card_id") or connector_card_id(project_id, name), str, f"{where}.card_id", "a CardID")
    if not CARD_ID.fullmatch(card_id):
        raise ConfigError(f"{where}.card_id {card_id!r} is not CRD- followed by a UUID")
    config.connectors.append(
        Connector(
            card_id=card_id,
            project_id=project_id,
            name=name,
            source=_expect(entry.get("source", "External system"), str, f"{where}.source", "a string"),
            status=status,
            domain=_expect(entry.get("domain", dept.domain), str, f"{where}.domain", "a string"),
            rows=_expect(entry.get("rows", 0), int, f"{where}.rows", "a whole number"),
            columns=tuple(columns.items()),
        )
    )


def load(config: EmulatorConfig, config_path: Path | None) -> tuple[EmulatorConfig, bool]:
    """Read the configuration for ``config.data_dir``; return it and whether defaults were just written.

    ``config_path`` wins; otherwise ``DATA_DIR/config.json`` is used, and written
    with :func:`default_data` on the first run.
    """
    first_run = False
    if config_path is None:
        config_path = config.data_dir / "config.json"
        if not config_path.exists():
            config.data_dir.mkdir(parents=True, exist_ok=True)
            config_path.write_text(json.dumps(default_data(), indent=2) + "\n", encoding="utf-8")
            config_path.chmod(0o600)  # it holds an API key
            first_run = True
    config.config_path = config_path
    return parse(read_file(config_path), config, str(config_path)), first_run
