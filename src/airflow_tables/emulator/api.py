"""The ``/v1.0`` endpoints of the seed, and the one place that decides status codes and bodies.

Every response carries ``Msg`` and ``ExecTime`` (seconds, as a number); a refusal
is an :class:`~.errors.ApiError` turned into ``{"Msg": reason, "ExecTime": t}``
by :func:`endpoint`. The status codes where the seed says "not shown" are ours
(``docs/emulator.md``): 401 no or unknown key, 403 no role in the department or
read-only, 404 unknown table, 400 malformed import, 415 not ``text/csv``, 413 over
the size limit, 402 no credit, 409 being read or locked, 422 a file the CSV rules
refuse. An import is checked in full (the file too) before its credit is spent,
so a refused import costs nothing.

An import body is bounded in size and time, as a server on a network must be: at
most the file limit plus :data:`~.multipart.BODY_ALLOWANCE` (413, at once when
``Content-Length`` says so), and within the configured body timeouts (408). So is
their number: past ``capacity.open_uploads`` bodies being received at once, an import
is answered 429 with ``Retry-After`` before its body is read. These answers close the
connection, since the rest of the body is not read.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

import anyio
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from airflow_tables.emulator.config import CARD_ID
from airflow_tables.emulator.errors import ApiError
from airflow_tables.emulator.multipart import BODY_ALLOWANCE, FilePart, FormParser, ImportForm, body_limit, boundary_of
from airflow_tables.validation import rules
from airflow_tables.validation.scan import FileScan, scan_file

if TYPE_CHECKING:
    from airflow_tables.emulator.config import ApiKey, EmulatorConfig
    from airflow_tables.emulator.reader import Reader
    from airflow_tables.emulator.store import Card, Store

#: For an answer given before the body was read to its end: the connection cannot carry another request.
CLOSE = {"Connection": "close"}


def json_response(started: float, status: int, body: dict, headers: dict[str, str] | None = None) -> Response:
    """The seed's envelope: ``Msg`` and ``ExecTime`` first, then the endpoint's own fields."""
    payload = {"Msg": body.pop("Msg", "OK"), "ExecTime": round(time.perf_counter() - started, 6), **body}
    return Response(
        json.dumps(payload, ensure_ascii=False), status_code=status, headers=headers, media_type="application/json"
    )


def endpoint(handler: Callable[[Request], Awaitable[dict]]) -> Callable[[Request], Awaitable[Response]]:
    """Time the handler and turn its dict, or its :class:`ApiError`, into a response."""

    async def respond(request: Request) -> Response:
        started = time.perf_counter()
        try:
            body = await handler(request)
        except ApiError as err:
            return json_response(started, err.status, {"Msg": err.msg}, err.headers)
        except ClientDisconnect:  # nobody is left to answer; the upload was already discarded
            return Response(status_code=400)
        return json_response(started, 200, body)

    return respond


def summary(card: Card, *, lock_while_reading: bool = False) -> dict:
    """A table summary (seed 2.1); connector fields are null for an uploaded table.

    ``lock_while_reading`` (a test setting) shows a table being read as locked too: the seed
    defines ``LockedFromDelete`` as "cannot be deleted right now", which a read also causes.
    """
    return {
        "CardID": card.card_id,
        "CardName": card.name,
        "Rows": card.rows,
        "Domain": card.domain,
        "Processed": card.processed,
        "SuccessfulUpload": card.successful,
        "ConnectorSource": card.connector_source,
        "ConnectorStatus": card.connector_status,
        "UploadCompletionTime": card.completed_at,
        "LockedFromDelete": card.locked_from_delete or (lock_while_reading and not card.processed),
    }


def detail(card: Card, *, lock_while_reading: bool = False) -> dict:
    """A table detail (seed 2.2): the summary, the description and the columns."""
    return {
        **summary(card, lock_while_reading=lock_while_reading),
        "Description": card.description,
        "Columns": card.columns,
    }


class Api:
    """The seed's four endpoints over the store and the reader."""

    def __init__(self, config: EmulatorConfig, store: Store, reader: Reader) -> None:
        self.config = config
        self.store = store
        self.reader = reader
        self.imports_accepted = 0
        self.open_uploads = 0  # import bodies being received now (one event loop: no lock)

    def routes(self) -> list[Route]:
        return [
            Route("/v1.0/projects/{project_id}/cards", endpoint(self.list_cards), methods=["GET"]),
            Route("/v1.0/projects/{project_id}/cards/{card_id}", endpoint(self.get_card), methods=["GET"]),
            Route("/v1.0/projects/{project_id}/cards/{card_id}", endpoint(self.delete_card), methods=["DELETE"]),
            Route("/v1.0/data/import", endpoint(self.import_data), methods=["POST"]),
        ]

    # -- who is calling -------------------------------------------------------------------

    def caller(self, request: Request) -> ApiKey:
        """The caller's key, or 401 (the key is never echoed back)."""
        value = request.headers.get("x-api-key")
        if not value:
            raise ApiError(401, "the X-API-Key header is missing; every request needs the caller's API key")
        key = self.config.api_keys.get(value)
        if key is None:
            raise ApiError(401, "the X-API-Key header does not hold a key this service knows")
        return key

    @staticmethod
    def authorize(key: ApiKey, project_id: str, action: str, *, manage: bool) -> None:
        """403 unless the key has a role in the department (and the manage role, when ``manage``)."""
        role = key.role(project_id)
        if role is None:
            raise ApiError(403, f"this API key has no access to department {project_id}")
        if manage and role != "manage":
            raise ApiError(
                403,
                f"this API key may read department {project_id} but not manage its data, which {action} needs",
            )

    # -- list, fetch, delete --------------------------------------------------------------

    async def list_cards(self, request: Request) -> dict:
        project_id = request.path_params["project_id"]
        self.authorize(self.caller(request), project_id, "listing tables", manage=False)
        lock = self.reader.controls.lock_while_reading
        return {"Cards": [summary(c, lock_while_reading=lock) for c in self.store.list_cards(project_id)]}

    async def get_card(self, request: Request) -> dict:
        project_id, card_id = request.path_params["project_id"], request.path_params["card_id"]
        self.authorize(self.caller(request), project_id, "fetching a table", manage=False)
        return detail(
            self.store.get_card(project_id, card_id), lock_while_reading=self.reader.controls.lock_while_reading
        )

    async def delete_card(self, request: Request) -> dict:
        project_id, card_id = request.path_params["project_id"], request.path_params["card_id"]
        self.authorize(self.caller(request), project_id, "deleting a table", manage=True)
        self.store.delete_card(project_id, card_id)
        return {"Success": True}

    # -- import ---------------------------------------------------------------------------

    async def import_data(self, request: Request) -> dict:
        """Receive the whole body (so a refusal is a clean response; only one past its bounds is cut), then check.

        At most ``capacity.open_uploads`` bodies are received at once; the next is refused first,
        whoever sends it, before anything else is looked at.
        """
        capacity = self.config.capacity.open_uploads
        if self.open_uploads >= capacity:
            raise ApiError(
                429,
                f"the emulator is already receiving {capacity} import bodies (capacity.open_uploads); this one was "
                "not read, nothing was kept and no credit was used. Send it again in a moment",
                {**CLOSE, "Retry-After": "1"},
            )
        self.open_uploads += 1
        try:
            return await self._import(request)
        finally:
            self.open_uploads -= 1

    async def _import(self, request: Request) -> dict:
        caller = self.config.api_keys.get(request.headers.get("x-api-key") or "")
        boundary = boundary_of(request.headers.get("content-type"))
        limits = self.config.limits
        limit = body_limit(limits.max_bytes)
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise ApiError(413, self._over_limit(f"declares {int(declared):,} bytes", limit), CLOSE)
        relative, path = self.store.new_upload_path()
        form = ImportForm()
        try:
            # The bytes of a caller the import will refuse (unknown, or without the manage role in the
            # department the form names before its file) are counted, never written.
            parser = None
            if boundary is not None:
                file_path = path if caller is not None else None
                parser = FormParser(
                    boundary,
                    file_field="File",
                    file_path=file_path,
                    max_bytes=limits.max_bytes,
                    may_keep=lambda fields: _may_import(caller, fields.get("ProjectID")),
                )
            received = 0
            try:
                async for chunk in self._body(request):
                    received += len(chunk)
                    if received > limit:
                        raise ApiError(413, self._over_limit(f"is over {limit:,} bytes", limit), CLOSE)
                    if parser is not None:
                        parser.feed(chunk)
            except BaseException:
                if parser is not None:
                    parser.abort()
                raise
            if parser is not None:
                form = parser.finish()
            card, scan = await self._accept(request, boundary, form, relative)
        except BaseException:
            form.discard()
            raise
        self.imports_accepted += 1
        self.reader.start(card, scan)
        if form.fields.get("CardID") and not self.reader.controls.replacement_card_id:
            return {"Success": True}  # a test setting: the seed only implies that a replacement repeats it
        return {"Success": True, "CardID": card.card_id}

    def _over_limit(self, what: str, limit: int) -> str:
        return (
            f"the request body {what}; the emulator takes at most {limit:,} bytes: the file limit of "
            f"{self.config.limits.max_bytes:,} bytes plus {BODY_ALLOWANCE // 1024**2} MiB for the form's other "
            "parts. Nothing was kept and no credit was used; split the file"
        )

    async def _body(self, request: Request) -> AsyncIterator[bytes]:
        """The request body chunk by chunk; 408 once it is slower than the configured body timeouts."""
        timeouts = self.config.timeouts
        deadline = time.monotonic() + timeouts.body
        chunks = request.stream().__aiter__()
        while True:
            remaining = deadline - time.monotonic()
            try:
                with anyio.fail_after(max(0.0, min(remaining, timeouts.body_idle))):
                    chunk = await chunks.__anext__()
            except StopAsyncIteration:
                return
            except TimeoutError:
                late = (
                    f"did not arrive within {timeouts.body:g} s (timeouts.body)"
                    if remaining <= timeouts.body_idle
                    else f"stopped: no byte came for {timeouts.body_idle:g} s (timeouts.body_idle)"
                )
                raise ApiError(
                    408, f"the request body {late}; nothing was kept and no credit was used. Send it again", CLOSE
                ) from None
            yield chunk

    @staticmethod
    def _fields(boundary: bytes | None, form: ImportForm) -> tuple[str, FilePart, str | None]:
        """The request's shape (400): ProjectID, the File part with a .csv name, an optional well-formed CardID."""
        if boundary is None:
            raise ApiError(
                400,
                "the import request must be multipart/form-data with a boundary; let the HTTP tool set "
                "the Content-Type header (do not set it yourself)",
            )
        if form.problem:
            raise ApiError(400, f"the import request is malformed: {form.problem}")
        project_id = form.fields.get("ProjectID", "").strip()
        if not project_id:
            raise ApiError(400, "the form field ProjectID is missing or empty; it names the department to import into")
        upload = form.file
        if upload is None:
            raise ApiError(400, "the form has no File part; send the CSV file as the form field File")
        card_id = form.fields.get("CardID")
        if card_id is not None:
            card_id = card_id.strip()
            if not CARD_ID.fullmatch(card_id):
                raise ApiError(
                    400,
                    f"the form field CardID {card_id!r} is not a CardID (CRD- followed by a UUID); "
                    "leave CardID out to create a new table",
                )
        if not upload.filename:
            raise ApiError(400, "the File part has no file name; the name must end in .csv")
        if (problem := rules.check_file_name(upload.filename)) is not None:
            raise ApiError(400, problem.message)
        return project_id, upload, card_id

    async def _accept(
        self, request: Request, boundary: bytes | None, form: ImportForm, relative: str
    ) -> tuple[Card, FileScan]:
        """Apply every import rule in the documented order; spend the credit last."""
        key = self.caller(request)
        project_id, upload, card_id = self._fields(boundary, form)
        self.authorize(key, project_id, "importing a file", manage=True)
        media_type = (upload.content_type or "").split(";")[0].strip().lower()
        if media_type != rules.MEDIA_TYPE:
            raise ApiError(
                415,
                f"the File part {upload.filename!r} is sent as {upload.content_type or 'no media type'!s}; the "
                f'service takes only text/csv (with curl: -F "File=@{upload.filename};type=text/csv")',
            )
        if upload.too_large:
            problem = rules.too_large_problem(upload.size, self.config.limits)
            raise ApiError(413, f"the file {upload.filename!r} was refused and no credit was used: {problem.message}")
        self.store.check_import(key.organisation, project_id, card_id)
        if upload.path is None:  # kept for every known caller's upload that is not too large
            raise ApiError(400, f"the file {upload.filename!r} was not received whole")
        scan = await run_in_threadpool(scan_file, upload.path, self.config.limits, column_types=True)
        if scan.errors:
            problems = "; ".join(str(p) for p in scan.errors)
            raise ApiError(422, f"the file {upload.filename!r} was refused and no credit was used: {problems}")
        card = self.store.accept_import(
            key.organisation,
            project_id,
            card_id,
            name=upload.filename[: -len(rules.FILE_SUFFIX)],
            domain=self.config.department(project_id).domain,
            file=relative,
            file_name=upload.filename,
        )
        return card, scan


def _may_import(key: ApiKey | None, project_id: str | None) -> bool:
    """Whether an upload's bytes are worth keeping: the caller manages the named department (or, before the
    form names one, any department)."""
    if key is None:
        return False
    if project_id is None:
        return bool(key.manage)
    return key.role(project_id.strip()) == "manage"
