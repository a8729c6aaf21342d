"""`runspec plan SPEC...`: what each spec would do and cost, before anyone pays: for a pull
request that adds or changes specs.

For each spec: valid, or its problems with `file:line:col`; the worst-case bill (wall clock plus
overrun at `budget.hourly_cost`, rounded to the provider's billing increment, runspec.billing)
and, where the rounding pays for time that trains nothing, the wall clock that would use it;
the epochs that fit when an epoch's time is known (`--epoch-time`); and the finish that will be
applied, on which provider. Text, `--json` (an object per spec) or `--format markdown` (a
pull-request comment). Exit 1 when any spec is invalid, 2 when a path cannot be read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runspec.commands import print_json
from runspec.errors import Outcome

if TYPE_CHECKING:
    from runspec.spec.model import Spec

PROVIDER_CHOICES = ("aws", "gcp", "vast", "runpod", "lambda", "hetzner", "hf-jobs")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths", nargs="+", type=Path, metavar="SPEC", help="spec files or folders (recursive)"
    )
    parser.add_argument(
        "--provider",
        choices=PROVIDER_CHOICES,
        default=None,
        help="where the runs will be billed (default: each spec's finish.provider)",
    )
    parser.add_argument(
        "--epoch-time",
        metavar="DURATION",
        default=None,
        help="one epoch's measured time (e.g. 90s): how many of train.epochs fit",
    )
    parser.add_argument(
        "--hub",
        metavar="ORG",
        default=None,
        help="plan epochs from the epoch times ORG's finished runs measured (their receipts)",
    )
    parser.add_argument(
        "--format",
        choices=("text", "json", "markdown"),
        default="text",
        help="output format (default text; markdown: a pull-request comment)",
    )
    parser.add_argument(
        "--json", dest="format", action="store_const", const="json", help="same as --format json"
    )


def _finish(spec: Spec, provider: str | None) -> dict[str, Any]:
    from runspec.providers import PROVIDERS
    from runspec.spec.model import FinishAction

    action = spec.finish.action
    where = provider or "the provider detected on the box"
    fallback = spec.finish.unverified.value
    adapter = PROVIDERS.get(provider or "")
    if fallback == "stop" and adapter is not None and not adapter.can_stop:
        fallback = f"left running ({provider} cannot stop an instance)"
    words = {
        FinishAction.NONE: "none: the machine keeps billing until someone ends it",
        FinishAction.COMMAND: f"runs {' '.join(spec.finish.command)!r}",
        FinishAction.POWEROFF: "powers the machine off (systemd), after the final push",
        FinishAction.STOP: f"stops the instance through {where} (its disk kept) after the "
        "final push",
        FinishAction.DESTROY: f"destroys the instance through {where} after a verified final "
        f"push, else {fallback}",
        FinishAction.AUTO: f"stop or destroy through {where}, whichever finish.storage makes "
        f"cheaper, after a verified final push (else {fallback})",
    }[action]
    return {
        "action": action.value,
        "provider": provider,
        "unverified": fallback,
        "words": words,
    }


def _epochs(spec: Spec, epoch_s: float | None, came: str) -> dict[str, Any] | None:
    from runspec.budgetfit import epochs_in

    if epoch_s is None:
        return None
    fit = epochs_in(spec, epoch_s, spec.budget.wall_clock)
    return {"of": spec.train.epochs, "fit": max(0, fit), "epoch_seconds": epoch_s, "from": came}


def plan_spec(
    spec: Spec, provider: str | None, epoch_s: float | None, came: str = "--epoch-time"
) -> dict[str, Any]:
    """The plan of one valid spec, as `--json` gives it; `came`: where `epoch_s` is from."""
    from runspec.billing import bill, unrounded

    named = provider or (None if spec.finish.provider == "auto" else spec.finish.provider)
    wall, overrun, hourly = spec.budget.wall_clock, spec.budget.overrun, spec.budget.hourly_cost
    worst: dict[str, Any] | None = None
    advice = None
    if named is not None:
        billed = bill(named, wall, overrun, hourly)
        worst = billed.to_json()
        advice = billed.advice(wall)
    elif hourly is not None:  # billed by whoever the box finds: unrounded, said so
        worst = unrounded(wall, overrun, hourly).to_json()
    return {
        "name": spec.name,
        "wall_clock_seconds": wall,
        "overrun_seconds": overrun,
        "hourly_cost": hourly,
        "worst_case_cost": worst,
        "advice": advice,
        "epochs": _epochs(spec, epoch_s, came),
        "finish": _finish(spec, named),
    }


def _epoch_time(spec: Spec, epoch_s: float | None, runs: list[Any]) -> tuple[float | None, str]:
    """--epoch-time, else the median of the org's runs of the same model, size, batch, GPU."""
    from runspec.push.measured import epoch_time

    if epoch_s is not None or not runs:
        return epoch_s, "--epoch-time"
    found = epoch_time(spec, runs)
    if found is None:
        return None, ""
    median, repos = found
    return median, f"the median of {len(repos)} earlier runs at the Hub ({', '.join(repos[:3])})"


def _entries(
    args: argparse.Namespace, epoch_s: float | None, runs: list[Any]
) -> tuple[list[dict[str, Any]], int]:
    """(an entry per spec file, how many paths could not be read)."""
    from runspec.commands.validate import _not_a_spec, spec_files
    from runspec.errors import RunspecError, SpecInvalid
    from runspec.spec.loader import check_spec_file, load_spec

    entries: list[dict[str, Any]] = []
    unreadable = 0
    for root in args.paths:
        files = list(spec_files(root)) if root.exists() or root.is_symlink() else []
        if root.is_dir():
            files = [f for f in files if not _not_a_spec(f)]
        if not files:
            unreadable += 1
            why = "no such file or folder" if not root.exists() else "no runspec specs in it"
            entries.append({"file": str(root), "valid": False, "problems": [], "error": why})
            continue
        for path in files:
            entry: dict[str, Any] = {"file": str(path)}
            try:
                problems = check_spec_file(path)
                spec = None if problems else load_spec(path)
            except SpecInvalid as exc:
                problems, spec = list(exc.problems), None
            except RunspecError as exc:
                unreadable += 1
                entries.append({**entry, "valid": False, "problems": [], "error": str(exc)})
                continue
            entry["valid"] = spec is not None
            entry["problems"] = [p.as_dict() for p in problems]
            if spec is not None:
                seconds, came = _epoch_time(spec, epoch_s, runs)
                entry.update(plan_spec(spec, args.provider, seconds, came))
            entries.append(entry)
    return entries, unreadable


def run(args: argparse.Namespace) -> Outcome:
    from runspec.errors import UsageError
    from runspec.units import parse_duration
    from runspec.views.planview import markdown, text

    epoch_s = None
    if args.epoch_time is not None:
        try:
            epoch_s = parse_duration(args.epoch_time)
        except ValueError as exc:
            raise UsageError(f"--epoch-time: {exc}") from exc
    runs: list[Any] = []
    if args.hub:
        from runspec.push.measured import measured

        runs = measured(args.hub)
    entries, unreadable = _entries(args, epoch_s, runs)
    if args.format == "json":
        print_json(entries)
    else:
        sys.stdout.write((markdown if args.format == "markdown" else text)(entries))
        sys.stdout.flush()
    if unreadable:
        return Outcome.USAGE
    return Outcome.FAILED if any(not e["valid"] for e in entries) else Outcome.OK
