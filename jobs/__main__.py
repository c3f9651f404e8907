"""``python -m jobs``: submit translation jobs and watch them.

    python -m jobs submit news.yaml              check the spec and inputs, enqueue, print the job id
    python -m jobs wait news-20261202T010203Z-ab12 --output s3://results/translations
    python -m jobs status JOB_ID                 progress: documents done/total, rate, ETA, errors
    python -m jobs list --output PREFIX          every job under an output prefix
    python -m jobs cancel JOB_ID                 workers skip its chunks that have not started
    python -m jobs resume JOB_ID                 enqueue exactly the chunks with no result part
    python -m jobs demo                          the whole system on embedded defaults (see jobs/demo.py)

A job's output prefix is found from --output, else FANYI_OUTPUT, else the Redis registry of
submitted jobs. The broker is FANYI_BROKER_URL (see worker/settings.py for every setting).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobs import api


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m jobs", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    sub = p.add_subparsers(dest="command", required=True)
    submit = sub.add_parser("submit", help="validate a spec (YAML/JSON), write the job, enqueue its chunks")
    submit.add_argument("spec", help="job spec file (see jobs/spec.py for the fields)")
    submit.add_argument("--wait", action="store_true", help="then show progress until the job finishes")
    for name, text in [
        ("status", "one job's progress"),
        ("wait", "show progress until the job finishes"),
        ("cancel", "stop a job: chunks not yet started are skipped"),
        ("resume", "enqueue the chunks that have no result part (after a crash, a cancel or a Redis loss)"),
    ]:
        verb = sub.add_parser(name, help=text)
        verb.add_argument("job_id")
        verb.add_argument("--output", help="the job's output prefix (default: FANYI_OUTPUT or the Redis registry)")
        if name == "status":
            verb.add_argument("--json", action="store_true", help="print the status as JSON")
        if name == "wait":
            verb.add_argument("--timeout", type=float, help="give up after this many seconds (exit 3)")
    sub.add_parser("demo", help="run the demo job on a throwaway Redis and worker (python -m jobs demo --help)")
    listing = sub.add_parser("list", help="jobs under an output prefix")
    listing.add_argument("--output", required=True, help="output prefix, e.g. s3://results/translations")
    return p


def run(args: argparse.Namespace) -> int:
    from jobs import api

    if args.command == "submit":
        spec = api.load_spec(args.spec)
        job_id = api.submit(spec, on_progress=lambda line: print(line, file=sys.stderr, flush=True))
        print(job_id, flush=True)
        return _finished(api.wait(job_id, spec.output, on_progress=api.print_progress)) if args.wait else 0
    if args.command == "status":
        s = api.status(args.job_id, args.output)
        print(json.dumps({**asdict(s), "eta": s.eta}) if args.json else api.progress_line(s))
        return 0
    if args.command == "wait":
        try:
            return _finished(api.wait(args.job_id, args.output, timeout=args.timeout, on_progress=api.print_progress))
        except TimeoutError as err:
            print(f"error: {err}", file=sys.stderr)
            return 3
    if args.command == "list":
        for s in api.jobs(args.output):
            print(f"{s.id}  {s.state:9}  {api.progress_line(s)}")
        return 0
    if args.command == "cancel":
        api.cancel(args.job_id, args.output)
        print(f"cancelled {args.job_id}: `python -m jobs resume {args.job_id}` starts it again")
        return 0
    count = api.resume(args.job_id, args.output)
    print(f"enqueued {count} chunk(s) of {args.job_id}")
    return 0


def _finished(s: api.JobStatus) -> int:
    flags = ", ".join(f"{flag} {count:,}" for flag, count in s.sentence_flags.items()) or "none"
    print(
        f"{s.id}: {s.state}, {s.done:,} documents, {s.partial or 0:,} partial, {s.errors or 0:,} errors; "
        f"sentences flagged: {flags}; output {s.output}/{s.id}/parts/"
    )
    return 0 if s.state == "succeeded" else 2


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["demo"]:  # before anything reads the settings: the demo sets its own broker
        from jobs.demo import main as demo

        return demo(argv[1:])
    args = parser().parse_args(argv)
    from jobs.spec import SpecError
    from worker.storage import StorageError

    try:
        sys.exit(run(args))
    except (SpecError, StorageError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
