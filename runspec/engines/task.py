"""What every engine's job shares: the install, the spec carried inside the job, the time it
may take, and the checks a spec must pass before it goes to an engine.

The spec travels as its exact text in an environment variable (no file on the renter's
laptop is named, none is uploaded), and the job writes it back byte for byte, so the
provenance's sha256 on the Hub matches the file in the renter's git tree. The Hub token never
travels in the file: each engine reads it from its own secrets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import yaml

from runspec.errors import Outcome, RunspecError
from runspec.spec import secreturls
from runspec.spec.model import Spec

SPEC_VARIABLE = "RUNSPEC_SPEC_YAML"
SPEC_FILE = "runspec-spec.yaml"  # in the job's working folder, on the engine's machine
TOKEN_VARIABLE = "HF_TOKEN"
# The id `runspec launch` gives each HF job (HF Jobs gives its job none in the environment).
HF_TASK_ID_VARIABLE = "RUNSPEC_TASK_ID"
# Room for the install before `runspec run` starts its budget: an engine's time cap counts
# from the job's start, and must never cut a run before its own wall_clock is spent.
DEFAULT_SETUP = 15 * 60.0
# The kernel's limit on one environment string (MAX_ARG_STRLEN) is 128 KiB; stay under it.
MAX_SPEC_BYTES = 100_000


class EngineMisfit(RunspecError):
    """A valid spec that this engine cannot run as written: every reason, one per line.
    Exit 2, as for an invalid spec: nothing was sent anywhere."""

    outcome = Outcome.USAGE

    def __init__(self, engine: str, reasons: list[str]) -> None:
        self.reasons = reasons
        lines = "\n".join(f"  {reason}" for reason in reasons)
        super().__init__(f"{engine} cannot run this spec as written:\n{lines}")


@dataclass(frozen=True)
class JobPlan:
    """What the engine is asked for, worked out once from the spec."""

    spec: Spec
    install: str
    setup: float = DEFAULT_SETUP

    @property
    def cap_seconds(self) -> int:
        """The engine's time cap: setup + wall_clock + overrun. runspec's own deadline (the
        wall_clock, the final push within the overrun) always comes first; the cap is the
        engine-side failsafe for a box whose runspec hung."""
        budget = self.spec.budget
        return math.ceil(self.setup + budget.wall_clock + budget.overrun)

    @property
    def budget_seconds(self) -> int:
        return math.ceil(self.setup + self.spec.budget.wall_clock)

    def install_line(self) -> str:
        return f"pip install --quiet {shell_word(self.install)}"

    def secret_names(self) -> list[str]:
        """Every secret the job needs, each once: the Hub token, then each `${NAME}` of the
        spec's notify: URLs and of the install URL. The engine gives each to the job as a
        secret (an environment variable there), never written in the file or the request."""
        texts = [*(self.spec.notify or ()), self.install]
        found = [name for text in texts for name in secreturls.names(text)]
        return list(dict.fromkeys([TOKEN_VARIABLE, *found]))

    def run_lines(self, engine: str) -> list[str]:
        """Writes the carried spec back byte for byte, then hands the process to runspec (exec:
        the engine's SIGINT or SIGTERM reaches runspec itself, not a shell). `--engine` names
        the engine: HF Jobs sets no variable runspec could recognise it by, and a job that did
        not say so would run each retry as a fresh run with a fresh budget."""
        return [
            f"printf '%s' \"${SPEC_VARIABLE}\" > {SPEC_FILE}",
            f"exec runspec run {SPEC_FILE} --engine {engine}",
        ]


def shell_word(text: str) -> str:
    """One shell word (the install requirement may hold [ ] and spaces): single-quoted, but
    each `${NAME}` in double quotes, so the job's shell puts the secret NAME there."""
    parts = secreturls.REF.split(text)
    quoted = [
        f'"${{{part}}}"' if odd else "'" + part.replace("'", "'\\''") + "'"
        for odd, part in ((i % 2 == 1, part) for i, part in enumerate(parts))
        if odd or part
    ]
    return "".join(quoted) or "''"


def duration_text(seconds: float) -> str:
    """90m, 6h, 45s: one unit, the largest that divides the seconds (both engines read it)."""
    whole = math.ceil(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if whole % size == 0:
            return f"{whole // size}{unit}"
    return f"{whole}s"


def misfits(spec: Spec) -> list[str]:
    """What every engine refuses: the checks the engines' validators cannot make."""
    reasons: list[str] = []
    if spec.push is None or spec.push.hub is None:
        reasons.append(
            "push.hub is needed: the engine deletes its machine when the job ends, and a "
            "fresh machine resumes from the Hub; weights only on that disk (or a push.dir "
            "there) are lost with it"
        )
    if spec.resources.gpu_name is None and spec.train.device != "cpu":
        reasons.append(
            'resources.gpus is needed (e.g. "H100:8"): the engine rents what the file asks '
            f"for, and train.device {spec.train.device} trains on GPUs"
        )
    if spec.dataset.path is not None:
        reasons.append(
            f"dataset.path {spec.dataset.path} is a path on one machine; the engine's fresh "
            "machine has no such file: use dataset.hub"
        )
    if len(spec.text.encode("utf-8")) > MAX_SPEC_BYTES:
        reasons.append(f"the spec is over {MAX_SPEC_BYTES} bytes, too big to carry in the job")
    return reasons


def task_yaml(task: dict[str, object], header: str) -> str:
    """The task as YAML a person can read: multi-line strings (the carried spec, the
    scripts) as literal blocks, keys in the order written."""

    class _Dumper(yaml.SafeDumper):
        pass

    def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    _Dumper.add_representer(str, _text)
    body = yaml.dump(task, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    comment = "".join(f"# {line}\n" for line in header.splitlines())
    return comment + body
