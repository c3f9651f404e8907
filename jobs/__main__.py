"""``python -m jobs``: submit translation jobs and watch them.

    python -m jobs submit news.yaml              check the spec and inputs, write the job, print its id, enqueue
    python -m jobs wait news-20261202T010203Z-ab12 --output s3://results/translations
    python -m jobs status JOB_ID                 state, documents done/total, rate, ETA, failed chunks
    python -m jobs list --output PREFIX          every job under an output prefix
    python -m jobs cancel JOB_ID                 workers skip its chunks that have not started
    python -m jobs resume JOB_ID                 enqueue exactly the chunks with no result part
    python -m jobs resume JOB_ID --retry-failed  ... and translate again the chunks that failed
    python -m jobs compact JOB_ID                merge an ended job's parts into files of about 64 MB
    python -m jobs delete JOB_ID                 remove an ended job, its results, progress and memory
    python -m jobs memory clear --output PREFIX  forget the translation memories of the jobs under PREFIX
    python -m jobs schedules                     each schedule's last run, a night waiting for it, nights skipped
    python -m jobs demo                          the whole system on embedded defaults (see jobs/demo.py)
    python -m jobs serve --tokens FILE           the jobs API over HTTP for every team (see jobs/server.py)

A job's output prefix is found from --output, else FANYI_OUTPUT, else the Redis registry of
submitted jobs. The broker is FANYI_BROKER_URL (see contract/settings.py for every setting).

Exit codes of `submit --wait` and `wait`: 0 succeeded, 4 completed with errors (some documents are
error rows), 5 failed (every document is an error row), 6 cancelled, 3 timed out (--timeout), 1 the
command could not be carried out (a bad spec, storage or the broker unreachable: one line says why).
"""

from __future__ import annotations

import argparse
import sys

SERVE = """The jobs API over HTTP, completion webhooks and a status page, for every team in the tokens file.

    python -m jobs serve --port 8080 --tokens tokens --output s3://results/teams \\
        --artifacts /models --inputs s3://corpora --webhooks-to https://hooks.example.com/

tokens: one `team token` line per token, optionally `max_queued_documents=N highest_priority=P` after it.
Then open http://HOST:PORT/ (the status page) or http://HOST:PORT/docs (every route); README.md has curl lines."""
EXIT = {"succeeded": 0, "completed_with_errors": 4, "failed": 5, "cancelled": 6}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m jobs", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    sub = p.add_subparsers(dest="command", required=True)
    submit = sub.add_parser("submit", help="validate a spec (YAML/JSON), write the job, enqueue its chunks")
    submit.add_argument("spec", help="job spec file (see contract/spec.py for the fields)")
    submit.add_argument("--wait", action="store_true", help="then show progress until the job ends")
    submit.add_argument(
        "--job-id", help="the job's id (default: <name>-<time>-<random>); submitting an existing one resumes it"
    )
    for name, text in [
        ("status", "one job's state and progress"),
        ("wait", "show progress until the job ends"),
        ("cancel", "stop a job: chunks not yet started are skipped"),
        ("resume", "enqueue the chunks that have no result part (after a crash, a cancel or a Redis loss)"),
        ("compact", "merge an ended job's parts into fewer, larger files (run it when nobody reads the job)"),
        ("delete", "remove an ended job: its folder, progress and translation memory (results included!)"),
    ]:
        verb = sub.add_parser(name, help=text)
        verb.add_argument("job_id")
        verb.add_argument("--output", help="the job's output prefix (default: FANYI_OUTPUT or the Redis registry)")
        if name in ("status", "wait"):
            verb.add_argument("--json", action="store_true", help="print the (final) status as JSON")
        if name == "wait":
            verb.add_argument("--timeout", type=float, help="give up after this many seconds (exit 3)")
        if name == "resume":
            verb.add_argument("--retry-failed", action="store_true", help="translate the failed chunks again too")
        if name == "delete":
            verb.add_argument("--force", action="store_true", help="a job still running too (it is cancelled first)")
        if name == "compact":
            verb.add_argument("--target-mb", type=float, default=64, help="size of each merged file (default 64)")
    sub.add_parser("demo", help="run the demo job on a throwaway Redis and worker (python -m jobs demo --help)")
    memory = sub.add_parser("memory", help="the translation memory jobs share (a spec's memory: job, shared, off)")
    memory.add_argument("action", choices=["clear"], help="clear: forget what the memory holds (costs time only)")
    memory.add_argument("--output", help="prefix (or memory_prefix) whose memories to clear (default: FANYI_OUTPUT)")
    memory.add_argument("--job", help="clear only this job's own memory (memory: job), not the shared one")
    sub.add_parser("schedules", help="each nightly schedule: its last run, a night waiting for it, nights skipped")
    serve = sub.add_parser(
        "serve", help="the jobs API over HTTP, one bearer token per team (see jobs/server.py)",
        formatter_class=argparse.RawDescriptionHelpFormatter, description=SERVE,
    )  # fmt: skip
    serve.add_argument("--tokens", required=True, metavar="FILE", help="`team token` lines (a Kubernetes Secret file)")
    serve.add_argument("--port", type=int, default=8080, help="port to listen on (default 8080)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0 in a container)")
    serve.add_argument("--output", help="a team's jobs go under OUTPUT/<team> (default: FANYI_OUTPUT)")
    serve.add_argument("--inputs", action="append", default=[], metavar="PREFIX",
                       help="a prefix specs may read inputs and glossaries from (repeat it)")  # fmt: skip
    serve.add_argument("--artifacts", action="append", default=[], metavar="FOLDER",
                       help="a folder whose artifacts specs may name (repeat it)")  # fmt: skip
    serve.add_argument("--max-upload-mb", type=float, default=1024, help="largest upload taken (default 1024)")
    serve.add_argument("--webhooks-to", action="append", default=[], metavar="PREFIX",
                       help="a URL prefix a job's notify.url may start with (repeat it)")  # fmt: skip
    serve.add_argument("--webhook-give-up-hours", type=float, default=24,
                       help="hours of failed deliveries before a job's webhook is given up (default 24)")  # fmt: skip
    listing = sub.add_parser("list", help="jobs under an output prefix")
    listing.add_argument("--output", help="output prefix, e.g. s3://results/translations (default: FANYI_OUTPUT)")
    return p


def run(args: argparse.Namespace) -> int:
    from jobs import api

    if args.command == "submit":
        spec = api.load_spec(args.spec)
        announce = lambda job_id: print(job_id, flush=True)
        say = lambda line: print(line, file=sys.stderr, flush=True)
        job_id = api.submit(spec, job_id=args.job_id, on_job=announce, on_progress=say)
        return _wait(job_id, spec.resolved().output, None, as_json=False) if args.wait else 0
    if args.command == "status":
        s = api.status(args.job_id, args.output)
        print(api.as_json(s) if args.json else f"{api.progress_line(s)}\n{api.report(s)}")
        return 0
    if args.command == "wait":
        return _wait(args.job_id, args.output, args.timeout, as_json=args.json)
    if args.command == "list":
        for s in api.jobs(args.output):
            print(f"{s.id}  {api.progress_line(s)}")  # the line says the state
        return 0
    if args.command == "cancel":
        dropped = api.cancel(args.job_id, args.output)
        print(f"cancelled {args.job_id} ({dropped:,} queued chunk(s) taken out of the queue): "
              f"`python -m jobs resume {args.job_id}` starts it again")  # fmt: skip
        return 0
    if args.command == "serve":
        from jobs.server import serve, settings_from

        settings = settings_from(args)
        teams = len(set(settings.teams.values()))
        print(f"serving the jobs API on http://{args.host}:{args.port} for {teams} team(s); jobs under "
              f"{settings.output}/<team>; /docs for the API", file=sys.stderr, flush=True)  # fmt: skip
        serve(settings, args.host, args.port)
        return 0
    if args.command == "schedules":
        from jobs.schedules import schedules

        found = schedules()
        for schedule in found:
            print("\n".join(schedule.lines()))
        if not found:
            print("no schedule has run yet (beat runs the specs of FANYI_SCHEDULES: see jobs/schedules.py)")
        return 0
    if args.command == "memory":
        cleared = api.clear_memory(args.output, args.job)
        for memory, entries in cleared.items():
            print(f"cleared {entries:,} entries of {memory}")
        print(f"{sum(cleared.values()):,} translation memory entries cleared under {api.output_prefix(args.output)}")
        return 0
    if args.command == "delete":
        objects, keys = api.delete(args.job_id, args.output, force=args.force)
        print(f"deleted job {args.job_id}: {objects:,} objects in storage, {keys:,} keys in Redis")
        return 0
    if args.command == "compact":
        say = lambda line: print(line, file=sys.stderr, flush=True)
        api.compact(args.job_id, args.output, target_mb=args.target_mb, on_progress=say)
        return 0
    count = api.resume(args.job_id, args.output, retry_failed=args.retry_failed)
    print(f"enqueued {count} chunk(s) of {args.job_id}")
    return 0


def _wait(job_id: str, output: str | None, timeout: float | None, *, as_json: bool) -> int:
    from jobs import api

    try:
        s = api.wait(job_id, output, timeout=timeout, on_progress=api.Progress())
    except TimeoutError as err:
        print(f"error: {err}", file=sys.stderr)
        return 3
    print(api.as_json(s) if as_json else api.report(s))
    return EXIT.get(s.state, 1)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["demo"]:  # before anything reads the settings: the demo sets its own broker
        from jobs.demo import main as demo

        return demo(argv[1:])
    args = parser().parse_args(argv)
    from contract import settings

    settings.exit_if_invalid()  # a bad FANYI_* variable: one line, exit 2
    from kombu.exceptions import OperationalError
    from redis.exceptions import RedisError

    from contract.spec import SpecError
    from contract.storage import StorageError
    from jobs.api import SubmitError, Unreachable, explain, redis_trouble

    told: tuple[type[Exception], ...] = (SpecError, StorageError, FileNotFoundError, SubmitError, Unreachable)
    if args.command == "serve":  # FastAPI is imported by the server alone: every other verb starts faster
        from jobs.server import SetupError

        told += (SetupError,)
    try:
        sys.exit(run(args))
    except told as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
    except (RedisError, OperationalError) as err:  # a Redis call no verb names: the broker's or the cache's
        print(f"error: Redis {redis_trouble(err, settings.BROKER_URL, settings.CACHE_URL)}", file=sys.stderr)
        sys.exit(1)
    except Exception as err:  # noqa: BLE001 - storage or the broker failing under a command: one line, no traceback
        print(f"error: {explain(err)} (is storage or the broker reachable? see FANYI_* settings)", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
