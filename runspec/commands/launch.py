"""`runspec launch SPEC --on hf-jobs [--flavor NAME] [--namespace NS]`: submit the run to
Hugging Face Jobs; it prints the job's id and how to follow it."""

from __future__ import annotations

import argparse
from pathlib import Path

from runspec.commands import add_format, print_json
from runspec.commands.export import add_plan_arguments, plan_from
from runspec.errors import Outcome, RunspecError
from runspec.hubreach import unreachable
from runspec.units import plain_int


class JobRefused(RunspecError):
    """HF Jobs did not take the job (or could not be reached)."""


def _attempts(text: str) -> int:
    attempts = plain_int(text)
    if attempts is None or not 1 <= attempts <= 10:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of attempts from 1 to 10")
    return attempts


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from runspec.engines.hfjobs import DEFAULT_ATTEMPTS, DEFAULT_IMAGE

    parser.add_argument("spec", type=Path, help="the run spec (YAML)")
    parser.add_argument("--on", required=True, choices=("hf-jobs",), help="the engine")
    parser.add_argument(
        "--flavor", help="the hardware (hf jobs hardware lists them); default: resources.gpus'"
    )
    parser.add_argument("--namespace", help="the user or organisation billed (default: yours)")
    parser.add_argument("--image", default=DEFAULT_IMAGE, help=f"default {DEFAULT_IMAGE}")
    parser.add_argument(
        "--attempts",
        type=_attempts,
        default=DEFAULT_ATTEMPTS,
        help=f"how many times HF Jobs may start it (default {DEFAULT_ATTEMPTS}); a fresh one "
        "resumes from the Hub",
    )
    add_plan_arguments(parser)
    add_format(parser)


def run(args: argparse.Namespace) -> Outcome:
    from huggingface_hub import HfApi, get_token
    from huggingface_hub.errors import HfHubHTTPError

    from runspec.engines import hfjobs

    plan = plan_from(args)
    api = HfApi()
    try:
        listing: list[hfjobs.Hardware] | None = hfjobs.hardware_from(api.list_jobs_hardware())
    except Exception as exc:
        if not isinstance(exc, HfHubHTTPError) and unreachable(exc) is None:
            raise
        # Unreachable or refused: the flavor named goes unchecked here, and HF checks it.
        listing = None
    flavor = hfjobs.choose_flavor(plan.spec, args.flavor, listing)
    request = hfjobs.job_request(plan, get_token(), flavor, args.image, args.attempts)
    try:
        namespace = args.namespace or api.whoami()["name"]
        job = api.run_job(**request.as_kwargs(), namespace=namespace)
    except HfHubHTTPError as exc:
        raise JobRefused(f"HF Jobs did not take the job: {exc}") from exc
    except Exception as exc:
        if (why := unreachable(exc)) is None:
            raise
        raise JobRefused(f"HF Jobs did not take the job: {why}") from exc
    if args.format == "json":
        print_json(
            {
                "job_id": job.id,
                "namespace": namespace,
                "url": job.url,
                "flavor": flavor,
                "timeout_seconds": request.timeout,
                "attempts": request.attempts,
            }
        )
        return Outcome.OK
    minutes = request.timeout // 60
    print(f"flavor {flavor}, timeout {minutes} min, attempts {request.attempts}")
    for line in hfjobs.follow_lines(job.id, namespace, job.url):
        print(line)
    return Outcome.OK
