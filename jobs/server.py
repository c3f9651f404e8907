"""``python -m jobs serve``: the jobs API over HTTP, for producers in any language.

    python -m jobs serve --port 8080 --tokens /etc/fanyi/tokens --output s3://results/teams \\
        --inputs s3://corpora --artifacts /models

Every route but ``/healthz`` wants ``Authorization: Bearer TOKEN``; the tokens file holds one ``team token`` pair
a line (in Kubernetes, a Secret mounted as that file), optionally with the team's limits after it:
``max_queued_documents=N`` (a submit that would take its unfinished documents past N is 429) and
``highest_priority=P`` (its specs may not ask for a more urgent priority than P). A team's jobs live under
``<output>/<team>``: it sees and steers those only (another team's job is 403, no token 401), and its specs may read
only what the server lets them (``--inputs`` prefixes, ``--artifacts`` folders, the team's own uploads): a spec is a
request from outside, so it may not name a file of the server's. One validation for the CLI and HTTP:
``jobs.api.submit``.

    POST /v1/jobs                  {"spec": {...}, "notify": {"url", "secret"}} (Idempotency-Key: a retried submit
                                   returns the same job; notify: a signed POST when it ends, jobs/webhooks.py)
    POST /v1/uploads               a JSONL or Parquet body, streamed to the team's storage: {"uri": ...} for inputs
    GET  /v1/jobs                  the team's jobs (?state=, ?name=, ?page_size=, ?page_token=)
    GET  /v1/jobs/{id}             what ``jobs status --json`` prints
    POST /v1/jobs/{id}:cancel      POST /v1/jobs/{id}:resume (?retry_failed=true)
    DELETE /v1/jobs/{id}           an ended job, its results included (?force=true: a running one, cancelled first)
    GET  /v1/jobs/{id}/results     the result parts' URIs, or ?format=jsonl: the rows (jobs up to 10,000 documents)
    GET  /v1/queues                depth per queue and priority, backlog, workers up and unhealthy
    GET  /healthz                  the process answers (and whether Redis does); /docs and /openapi.json
    GET  /                         the status page: log in with the token, jobs with their bars, queues, cancel

Every error is JSON, ``{"code": ..., "message": ...}``, the message saying what to do; no traceback and no token
reaches a response or a log line (the access log has method, path and status).

Why FastAPI under uvicorn: the OpenAPI document comes from the same pydantic models that check the requests (a
client generator reads /openapi.json), Starlette streams request bodies (uploads never sit in memory), and the
blocking job calls (storage, Redis) run on its thread pool; uvicorn is the ASGI server both document and test.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import secrets
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, StreamingResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException

from contract.job import MANIFEST, check_job_id, part_key, read_job
from contract.settings import PRIORITY_STEPS
from contract.spec import JobSpec, SpecError
from contract.storage import StorageError, open_storage
from jobs import webhooks

log = logging.getLogger("fanyi.api")
MAX_BODY_BYTES = 1_000_000  # a request that is not an upload: a spec is a page of settings
DRAIN_BYTES = 16 << 20  # of a body past its limit, read and dropped so that the client reads the 413
ROWS_LIMIT = 10_000  # documents of a job whose rows /results streams; larger jobs: read the parts
STATUS_PAGE = Path(__file__).with_name("status.html")  # GET /: the status page (no build step)
TEAM = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
MIN_TOKEN = 16


class Refused(Exception):
    """A request refused: its HTTP status, a code and a message that says what to do."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class SetupError(Exception):
    """The server cannot start as configured (one line: what to fix)."""


@dataclass(frozen=True)
class TeamLimits:
    """What a team may ask for: set on its line of the tokens file (``max_queued_documents=N``,
    ``highest_priority=P``); unset, no limit."""

    max_queued_documents: int | None = None  # documents of its jobs not yet done, the new job's included
    highest_priority: int | None = None  # the most urgent priority its specs may name (0 first .. 9 last)


def load_tokens(path: str | Path) -> tuple[dict[str, str], dict[str, TeamLimits]]:
    """The tokens file: ``team token [max_queued_documents=N] [highest_priority=P]`` a line (``#`` comments) ->
    sha256 of each token -> its team, and each team's limits (a team on several lines: the limits of its first)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise SetupError(f"cannot read the tokens file {path}: {err}") from None
    teams: dict[str, str] = {}
    limits: dict[str, TeamLimits] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split()
        team, token, options = (fields[0], fields[1], fields[2:]) if len(fields) > 1 else ("", "", [])
        if not TEAM.fullmatch(team) or len(token) < MIN_TOKEN:
            raise SetupError(
                f"{path}, line {number}: want `team token` (team: lowercase letters, digits, '-'; token: "
                f"{MIN_TOKEN}+ characters, e.g. from `python -c 'import secrets; print(secrets.token_urlsafe())'`)"
            )
        digest = _digest(token)
        if digest in teams:
            raise SetupError(f"{path}, line {number}: this token is already given to a team: one token, one team")
        teams[digest] = team
        limits.setdefault(team, _limits(options, f"{path}, line {number}"))
    if not teams:
        raise SetupError(f"{path} names no team: add a `team token` line")
    return teams, limits


def _limits(options: list[str], where: str) -> TeamLimits:
    found: dict[str, int] = {}
    for option in options:
        name, _, value = option.partition("=")
        if name not in ("max_queued_documents", "highest_priority") or not value.isdigit():
            raise SetupError(f"{where}: {option!r}: after the token come max_queued_documents=N, highest_priority=P")
        found[name] = int(value)
    if found.get("highest_priority", 0) > 9:
        raise SetupError(f"{where}: highest_priority is a priority, 0 (first) .. 9 (last)")
    return TeamLimits(**found)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class Settings:
    """What ``python -m jobs serve`` was told."""

    teams: dict[str, str]  # sha256 of a token -> team
    limits: dict[str, TeamLimits]  # team -> what it may ask for
    output: str  # a team's jobs go under <output>/<team>
    inputs: tuple[str, ...] = ()  # prefixes a spec's inputs and glossary may read, besides the team's own
    artifacts: tuple[str, ...] = ()  # folders a spec's artifacts may come from
    max_upload_bytes: int = 1 << 30
    webhooks_to: tuple[str, ...] = ()  # URL prefixes a job's notify may name (none: webhooks refused)
    webhook_give_up: float = 24 * 3600.0  # seconds of failed deliveries before an event is given up

    def team_output(self, team: str) -> str:
        return f"{self.output.rstrip('/')}/{team}"


# -- request and response bodies (the OpenAPI document) ------------------------------------------


class Notify(BaseModel):
    url: str = Field(description="where the final status is POSTed when the job ends (jobs/webhooks.py)")
    secret: str = Field(min_length=16, description="the HMAC-SHA256 key of the Fanyi-Signature header")


class SubmitBody(BaseModel):
    spec: dict[str, Any] = Field(description="a job spec as `jobs submit` reads it (contract/spec.py); `output` "
                                 "may be left out: the team's; `notify` may be given here too")  # fmt: skip
    notify: Notify | None = None


class Submitted(BaseModel):
    id: str
    status: dict[str, Any]


class Uploaded(BaseModel):
    uri: str = Field(description="name it among a spec's inputs")
    bytes: int


class JobPage(BaseModel):
    jobs: list[dict[str, Any]]
    next_page_token: str | None = None


class Resumed(BaseModel):
    id: str
    enqueued: int


class Problem(BaseModel):
    code: str
    message: str


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": Problem, "description": text}
    for status, text in [
        (400, "the request or its spec is wrong: the message says what to change"),
        (401, "no token, or one the server does not know"),
        (403, "the job is another team's, or the spec names a file the server does not let it read"),
        (404, "no such job"),
        (409, "a job with this id exists with another spec"),
        (429, "the team's cap of queued documents would be passed: wait until earlier jobs end"),
        (413, "the body is larger than the server takes"),
        (503, "storage or Redis did not answer: try again"),
    ]
}


# -- the app -----------------------------------------------------------------------------------


def create_app(settings: Settings) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        outputs = lambda: [settings.team_output(team) for team in sorted(set(settings.teams.values()))]
        deliverer = webhooks.Deliverer(outputs, _status, give_up=settings.webhook_give_up)
        deliverer.start()
        yield
        deliverer.stop()

    app = FastAPI(
        title="Fanyi jobs API",
        version="1",
        description="Bulk translation jobs: submit, watch, cancel, resume, read results (python -m jobs serve).",
        lifespan=lifespan,
    )
    submits = threading.Lock()  # submits with an idempotency key, one at a time: two retries never both write the job

    @app.exception_handler(Refused)
    async def refused(_: Request, err: Refused) -> JSONResponse:
        return JSONResponse({"code": err.code, "message": err.message}, status_code=err.status)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, err: RequestValidationError) -> JSONResponse:
        where = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors()[:5])
        return JSONResponse({"code": "bad_request", "message": f"the request does not fit: {where}"}, status_code=400)

    @app.exception_handler(HTTPException)
    async def http(_: Request, err: HTTPException) -> JSONResponse:
        return JSONResponse({"code": "http", "message": str(err.detail)}, status_code=err.status_code)

    @app.exception_handler(Exception)
    async def crashed(request: Request, err: Exception) -> JSONResponse:
        log.error("%s %s failed", request.method, request.url.path, exc_info=err)  # the path: never a token
        problem = _problem(err)
        return JSONResponse({"code": problem.code, "message": problem.message}, status_code=500)

    @app.middleware("http")
    async def body_limit(request: Request, call_next: Any) -> Any:
        limit = settings.max_upload_bytes if request.url.path == "/v1/uploads" else MAX_BODY_BYTES
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return await _refused_body(request, limit)
        return await call_next(request)

    def team_of(authorization: str | None = Header(None, description="Bearer TOKEN")) -> str:
        scheme, _, token = (authorization or "").partition(" ")
        team = settings.teams.get(_digest(token.strip())) if scheme.lower() == "bearer" and token.strip() else None
        if team is None:
            raise Refused(401, "unauthorized", "send `Authorization: Bearer TOKEN` with a token of your team")
        return team

    @app.get("/", include_in_schema=False)
    def page() -> HTMLResponse:
        return HTMLResponse(STATUS_PAGE.read_text(encoding="utf-8"))

    @app.get("/healthz", tags=["server"])
    def healthz() -> dict[str, Any]:
        return {"ok": True, "redis": _redis_answers()}

    @app.post("/v1/jobs", status_code=201, response_model=Submitted, responses=ERRORS, tags=["jobs"])
    def submit(
        body: SubmitBody,
        team: str = Depends(team_of),
        idempotency_key: str | None = Header(None, description="a retried submit with this key returns the job"),
    ) -> Submitted:
        from jobs import api

        raw = dict(body.spec)
        with _calls():
            notify = body.notify or (Notify.model_validate(raw.pop("notify")) if "notify" in raw else None)
        if notify is not None and not any(notify.url.startswith(prefix) for prefix in settings.webhooks_to):
            allowed = ", ".join(settings.webhooks_to) or "none: the server was started without --webhooks-to"
            raise Refused(403, "forbidden", f"notify.url {notify.url} is not a URL this server calls ({allowed})")
        output = settings.team_output(team)
        limits = settings.limits.get(team, TeamLimits())
        with _calls():
            spec = _checked_spec(raw, team, settings)
            job_id = _idempotent_id(spec.name, team, idempotency_key) if idempotency_key else None
        if limits.highest_priority is not None and spec.priority < limits.highest_priority:
            raise Refused(403, "forbidden", f"priority {spec.priority} is more urgent than your team may ask for: "
                          f"use {limits.highest_priority} to 9 (0 runs first)")  # fmt: skip
        admit = _admission(team, output, limits)
        with _calls(), submits if job_id else nullcontext():
            job_id = api.submit(spec, job_id=job_id, team=team, retried=job_id is not None, admit=admit)
            if notify is not None:
                webhooks.watch(open_storage(output), job_id, output, notify.url, notify.secret)
            return Submitted(id=job_id, status=_status(job_id, output))

    @app.post("/v1/uploads", status_code=201, response_model=Uploaded, responses=ERRORS, tags=["jobs"])
    async def upload(
        request: Request,
        team: str = Depends(team_of),
        format: str = Query("jsonl", pattern="^(jsonl|parquet)$", description="what the body is"),
    ) -> Uploaded:
        with tempfile.NamedTemporaryFile(prefix="fanyi-upload-", suffix=f".{format}") as spool:
            size = 0
            async for piece in request.stream():
                size += len(piece)
                if size > settings.max_upload_bytes + DRAIN_BYTES:
                    break  # past the limit (no Content-Length said so): read on a little, then close on it
                if size <= settings.max_upload_bytes:
                    spool.write(piece)
            if size > settings.max_upload_bytes:
                return _too_large(settings.max_upload_bytes)  # type: ignore[return-value]
            spool.flush()
            if not size:
                raise Refused(400, "bad_request", "the upload is empty: send the documents as the request body")
            name = f"_uploads/{secrets.token_hex(8)}.{format}"
            storage = open_storage(settings.team_output(team))
            with _calls():
                await run_in_threadpool(storage.put_file, name, Path(spool.name))
        return Uploaded(uri=f"{settings.team_output(team)}/{name}", bytes=size)

    @app.get("/v1/jobs", response_model=JobPage, responses=ERRORS, tags=["jobs"])
    def jobs(
        team: str = Depends(team_of),
        state: str | None = None,
        name: str | None = Query(None, description="jobs whose spec has this name"),
        page_size: int = Query(50, ge=1, le=500),
        page_token: str | None = Query(None, description="next_page_token of the page before"),
    ) -> JobPage:
        from jobs import api

        keep = lambda s: (state is None or s.state == state) and (name is None or s.name == name)
        with _calls():
            found = api.jobs(settings.team_output(team), after=page_token, keep=keep, limit=page_size + 1)
        listed = [json.loads(api.as_json(s)) for s in found[:page_size]]
        return JobPage(jobs=listed, next_page_token=listed[-1]["id"] if len(found) > page_size else None)

    @app.get("/v1/jobs/{job_id}", responses=ERRORS, tags=["jobs"])
    def job(job_id: str, team: str = Depends(team_of)) -> dict[str, Any]:
        with _calls():
            return _status(job_id, _owned(job_id, team, settings))

    @app.post("/v1/jobs/{job_id}:cancel", responses=ERRORS, tags=["jobs"])
    def cancel(job_id: str, team: str = Depends(team_of)) -> dict[str, Any]:
        from jobs import api

        with _calls():
            output = _owned(job_id, team, settings)
            api.cancel(job_id, output)
            return _status(job_id, output)

    @app.post("/v1/jobs/{job_id}:resume", response_model=Resumed, responses=ERRORS, tags=["jobs"])
    def resume(job_id: str, team: str = Depends(team_of), retry_failed: bool = False) -> Resumed:
        from jobs import api

        with _calls():
            output = _owned(job_id, team, settings)
            webhooks.rearm(open_storage(output), job_id, output)
            return Resumed(id=job_id, enqueued=api.resume(job_id, output, retry_failed=retry_failed))

    @app.delete("/v1/jobs/{job_id}", responses=ERRORS, tags=["jobs"])
    def delete(job_id: str, team: str = Depends(team_of), force: bool = False) -> dict[str, Any]:
        from jobs import api

        with _calls():
            output = _owned(job_id, team, settings)
            objects, _ = api.delete(job_id, output, force=force)
            webhooks.forget(job_id)
            return {"id": job_id, "deleted_objects": objects}

    @app.get("/v1/jobs/{job_id}/results", responses=ERRORS, tags=["jobs"])
    def results(job_id: str, team: str = Depends(team_of), format: str | None = Query(None, pattern="^jsonl$")) -> Any:
        with _calls():
            output = _owned(job_id, team, settings)
            storage = open_storage(output)
            job_ = read_job(storage, job_id)
            parts = [k for k in storage.list(f"{job_id}/parts") if k.endswith(".parquet")]
            if format is None:
                return {"id": job_id, "parts": [f"{output}/{k}" for k in parts]}
            if job_.documents > ROWS_LIMIT:
                raise Refused(400, "too_many_rows", f"job {job_id} has {job_.documents:,} documents, more than the "
                              f"{ROWS_LIMIT:,} streamed here: read its parts (this route without format)")  # fmt: skip
            done = {part_key(job_id, c) for c in range(len(job_.chunks))}
            return StreamingResponse(_rows(storage, [k for k in parts if k in done]), media_type="application/x-ndjson")

    @app.get("/v1/queues", responses=ERRORS, tags=["server"])
    def queues(team: str = Depends(team_of)) -> dict[str, Any]:
        from contract.cache import broker
        from worker.monitoring.exporter import fleet, queue_depths, unacked

        with _calls():
            client = broker()
            depths, running = queue_depths(client), unacked(client)
            up, unhealthy = fleet()
        return {
            "queues": {
                queue: {"waiting": dict(zip(map(str, PRIORITY_STEPS), counts)), "unacked": running[queue],
                        "backlog": sum(counts) + running[queue]}
                for queue, counts in depths.items()
            },
            "workers": {"up": up, "unhealthy": unhealthy},
        }  # fmt: skip

    return app


# -- what the routes share ---------------------------------------------------------------------


def _checked_spec(raw: dict[str, Any], team: str, settings: Settings) -> JobSpec:
    """The spec, refused unless everything it reads is the team's to read and its output the team's; checked on
    the request's own values before the spec is read, so a refusal says nothing of the server's files."""
    output = settings.team_output(team)
    if raw.get("output") not in (None, output):
        raise Refused(403, "forbidden", f"output is set by the server: leave it out (your jobs go under {output})")
    readable = (*settings.inputs, output)
    inputs: list[Any] = raw["inputs"] if isinstance(raw.get("inputs"), list) else []
    for what, uri in [*(("input", i) for i in inputs), ("glossary", raw.get("glossary"))]:
        if isinstance(uri, str) and not _within(uri, readable):
            raise Refused(403, "forbidden", f"{what} {uri} is outside what this server reads for you: use a URI "
                          f"under {', '.join(readable)}, or upload the file (POST /v1/uploads)")  # fmt: skip
    named: dict[str, Any] = raw["artifacts"] if isinstance(raw.get("artifacts"), dict) else {}
    for path in [raw.get("artifact"), *named.values()]:
        if isinstance(path, str) and not _within(path, settings.artifacts):
            offered = ", ".join(settings.artifacts) or "none: the server was started without --artifacts"
            raise Refused(403, "forbidden", f"artifact {path} is not one this server offers (under {offered})")
    memory = raw.get("memory_prefix")
    if isinstance(memory, str) and not _within(memory, (output,)):
        raise Refused(403, "forbidden", f"memory_prefix must be under your output {output}")
    return JobSpec.from_dict({**raw, "output": output}, source="the request's spec")


def _within(uri: str, roots: Sequence[str]) -> bool:
    """Whether ``uri`` (an S3 URI or an absolute local path; a glob stays one) is under one of ``roots``."""
    if ".." in uri.replace("\\", "/").split("/"):
        return False
    norm = lambda u: u.rstrip("/") if u.startswith("s3://") else os.path.normpath(u.removeprefix("file://"))
    if not uri.startswith("s3://") and not os.path.isabs(uri.removeprefix("file://")):
        return False
    return any(norm(uri) == norm(root) or norm(uri).startswith(norm(root) + "/") for root in roots)


def _admission(team: str, output: str, limits: TeamLimits) -> Callable[[int], None] | None:
    """What refuses a job whose documents would take the team past its cap of queued documents (429)."""
    cap = limits.max_queued_documents
    if cap is None:
        return None

    def admit(documents: int) -> None:
        from jobs import api

        unfinished = api.jobs(output, keep=lambda s: s.state in ("submitting", "running"))
        queued = sum(s.documents - s.done for s in unfinished)
        if queued + documents > cap:
            raise Refused(429, "too_many_documents", f"your team has {queued:,} documents queued and may have "
                          f"{cap:,}: this job's {documents:,} must wait until earlier jobs end")  # fmt: skip

    return admit


def _idempotent_id(name: str, team: str, key: str) -> str:
    digest = hashlib.sha256(b"\0".join(part.encode() for part in (team, key))).hexdigest()
    return check_job_id(f"{name}-{digest[:16]}")


def _owned(job_id: str, team: str, settings: Settings) -> str:
    """The output of ``job_id`` if it is ``team``'s: 403 if it is another team's, 404 if nobody's."""
    from jobs import api

    try:
        check_job_id(job_id)
    except StorageError as err:
        raise Refused(404, "not_found", str(err)) from None
    output = settings.team_output(team)
    if open_storage(output).exists(f"{job_id}/{MANIFEST}"):
        return output
    try:
        elsewhere = api._registered(job_id)
    except SpecError:
        elsewhere = None
    if elsewhere is not None:
        raise Refused(403, "forbidden", f"job {job_id} is not your team's")
    raise Refused(404, "not_found", f"no job {job_id}: GET /v1/jobs lists yours")


def _status(job_id: str, output: str) -> dict[str, Any]:
    from jobs import api

    status: dict[str, Any] = json.loads(api.as_json(api.status(job_id, output)))
    return status


def _rows(storage: Any, parts: list[str]) -> Iterator[bytes]:
    import io

    import pyarrow.parquet as pq

    for key in parts:
        for row in pq.read_table(io.BytesIO(storage.read(key))).to_pylist():
            yield (json.dumps(row, ensure_ascii=False, default=str) + "\n").encode()


def _redis_answers() -> bool:
    from contract import cache

    try:
        return bool(cache.cache().ping())
    except Exception:  # noqa: BLE001 - healthz says so, it does not fail
        return False


@contextmanager
def _calls() -> Iterator[None]:
    """Errors of the job calls as HTTP answers: a bad spec 400, a conflict 409, unreachable storage or Redis 503."""
    try:
        yield
    except Refused:
        raise
    except Exception as err:  # noqa: BLE001 - every failure is an answer with a code, never a traceback
        raise _refusal(err) from None


def _refusal(err: BaseException) -> Refused:
    from jobs.api import JobConflict, SubmitError, Unreachable, explain

    if isinstance(err, JobConflict):
        return Refused(409, "conflict", str(err))
    if isinstance(err, (SpecError, ValueError)):
        return Refused(400, "bad_spec", str(err))
    if isinstance(err, FileNotFoundError):
        return Refused(404, "not_found", str(err))
    if isinstance(err, (Unreachable, StorageError, SubmitError, OSError)):
        return Refused(503, "unavailable", f"{explain(err)}: try again")
    return _problem(err)


def _problem(err: BaseException) -> Refused:
    from jobs.api import explain

    return Refused(500, "internal", f"the server failed: {explain(err)} (it is logged without your token)")


async def _refused_body(request: Request, limit: int) -> JSONResponse:
    """413 for a body whose Content-Length is past ``limit``, nothing of it stored. Up to ``DRAIN_BYTES`` of it are
    read and dropped first: a client that sends its whole body before it reads (most do, without ``Expect:
    100-continue``) gets the answer instead of a broken pipe; past that the connection is closed on it."""
    drained = 0
    async for piece in request.stream():
        drained += len(piece)
        if drained > DRAIN_BYTES:
            break
    return _too_large(limit)


def _too_large(limit: int) -> JSONResponse:
    return JSONResponse(
        {"code": "too_large", "message": f"the body is larger than {limit:,} bytes: split it"}, status_code=413
    )


def settings_from(args: Any) -> Settings:
    """``python -m jobs serve``'s flags as ``Settings``; a bad one is a ``SetupError``."""
    from jobs.api import output_prefix

    output = output_prefix(args.output, needed="where do the teams' jobs go?")
    assert output is not None
    local = lambda uri: uri if uri.startswith("s3://") else os.path.abspath(uri.removeprefix("file://"))
    if args.max_upload_mb <= 0:
        raise SetupError(f"--max-upload-mb must be > 0, got {args.max_upload_mb}")
    teams, limits = load_tokens(args.tokens)
    return Settings(
        teams=teams,
        limits=limits,
        output=local(output),
        inputs=tuple(map(local, args.inputs)),
        artifacts=tuple(map(local, args.artifacts)),
        max_upload_bytes=int(args.max_upload_mb * (1 << 20)),
        webhooks_to=tuple(args.webhooks_to),
        webhook_give_up=args.webhook_give_up_hours * 3600.0,
    )


def serve(settings: Settings, host: str, port: int) -> None:
    import uvicorn

    uvicorn.run(create_app(settings), host=host, port=port, log_level="info", access_log=True)
