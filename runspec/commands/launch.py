"""`runspec launch SPEC --on hf-jobs [--flavor NAME] [--namespace NS] [--dry-run]`: submit the
run to Hugging Face Jobs; it prints the job's id and how to follow it. `--dry-run` prints the
job it would submit and the flavors HF Jobs lists, and submits nothing."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from runspec.commands import add_format, print_json
from runspec.commands.export import add_plan_arguments, plan_from
from runspec.errors import Outcome, RunspecError
from runspec.hubreach import unreachable
from runspec.units import plain_int

if TYPE_CHECKING:
    from runspec.engines.hfjobs import Hardware, JobRequest


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
        "--flavor",
        help="the hardware, by HF's name (--dry-run lists them); default: the cheapest whose "
        "GPUs are the spec's resources.gpus",
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
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the job it would submit and the flavors HF Jobs lists; submit nothing",
    )
    add_plan_arguments(parser)
    add_format(parser)


def flavor_line(hw: Hardware) -> str:
    """`a100x8 (8 x A100, $20.00/h)`: one flavor as the listing gives it."""
    gpus = f"{hw.gpu_count} x {hw.gpu_model}" if hw.gpu_model else "no GPU"
    price = f", ${hw.cost * 60 / 1e6:.2f}/h" if hw.cost is not None else ""
    return f"{hw.name} ({gpus}{price})"


def dry_run(args: argparse.Namespace, request: JobRequest, listing: list[Hardware] | None) -> None:
    """What `launch` would submit, without the token; nothing is sent."""
    flavors = [flavor_line(hw) for hw in listing] if listing is not None else None
    if args.format == "json":
        print_json(
            {
                "dry_run": True,
                "flavor": request.flavor,
                "timeout_seconds": request.timeout,
                "attempts": request.attempts,
                "image": request.image,
                "command": request.command,
                "flavors": [hw.name for hw in listing] if listing is not None else None,
            }
        )
        return
    print("dry run: nothing submitted")
    print(
        f"flavor {request.flavor}, timeout {request.timeout // 60} min, attempts {request.attempts}"
    )
    print(f"image {request.image}")
    print(f"the job runs: {request.command[-1]}")
    if flavors is None:
        print("the flavors HF Jobs has: its hardware listing could not be read")
    else:
        print("the flavors HF Jobs has: " + ", ".join(flavors))


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
    if args.dry_run:
        dry_run(args, request, listing)
        return Outcome.OK
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
