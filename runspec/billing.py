"""How each provider rounds the time it bills: the increment a run's worst case is billed at.

A run's worst case is its wall clock plus its overrun (runspec.cost). A provider bills that
time rounded up to its own increment, sometimes after a minimum; where the increment is
coarse (Hetzner's started hour), the rounding pays for time that trains nothing, and a wall
clock that uses it trains longer for the same money.

Sources (each provider's own pricing documentation):
- AWS EC2: "per-second billing ... with a minimum of 60 seconds" for Linux instances
  (aws.amazon.com/ec2/pricing/, "Per Second Billing").
- GCP Compute Engine: "billed in one-second increments, with a one-minute minimum"
  (cloud.google.com/compute/vm-instance-pricing, "Billing model").
- vast.ai: instances are charged per second of rental (docs.vast.ai, "Billing").
- RunPod: "All compute and storage charges are billed per second"
  (docs.runpod.io/accounts-billing/billing).
- Lambda: on-demand instances are "billed in one-minute increments"
  (docs.lambda.ai, "Billing").
- Hugging Face Jobs: "Billing on Jobs is based on hardware usage and is computed by the
  minute" (huggingface.co/docs/hub/jobs-pricing).
- Hetzner Cloud: billed per started hour up to a monthly cap (docs.hetzner.com/cloud,
  "Billing": "each hour started is charged").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from runspec.clock import human_duration

MINUTE = 60.0
HOUR = 3600.0
# Rounding that wastes less than this is not worth a suggestion: a minute of the budget is
# noise beside a run's own estimate.
WORTH_SAYING_S = 5 * MINUTE


@dataclass(frozen=True)
class Increment:
    provider: str
    step_s: float  # billed in whole steps of this
    minimum_s: float = 0.0  # and at least this much

    def billed_seconds(self, used_s: float) -> float:
        steps = math.ceil(max(0.0, used_s) / self.step_s - 1e-9)
        return max(self.minimum_s, steps * self.step_s)

    def words(self) -> str:
        """`per second after a minute`, `per started hour`, as people read it."""
        unit = {1.0: "second", MINUTE: "minute", HOUR: "started hour"}.get(
            self.step_s, human_duration(self.step_s)
        )
        after = f" after a {human_duration(self.minimum_s)} minimum" if self.minimum_s else ""
        return f"per {unit}{after}"


INCREMENTS: dict[str, Increment] = {
    "aws": Increment("aws", 1.0, MINUTE),
    "gcp": Increment("gcp", 1.0, MINUTE),
    "vast": Increment("vast", 1.0),
    "runpod": Increment("runpod", 1.0),
    "lambda": Increment("lambda", MINUTE),
    "hf-jobs": Increment("hf-jobs", MINUTE),
    "hetzner": Increment("hetzner", HOUR),
}


@dataclass(frozen=True)
class Bill:
    """What a run's worst case is billed at on one provider."""

    provider: str
    increment: str  # Increment.words()
    used_s: float  # wall clock plus overrun
    billed_s: float
    usd: float | None  # billed_s at the hourly cost; None without one
    wasted_s: float  # billed and not used
    # A wall clock that uses the billed time (None: the rounding wastes too little to say).
    better_wall_clock_s: float | None

    def to_json(self) -> dict[str, object]:
        return {
            "provider": self.provider,
            "increment": self.increment,
            "used_seconds": self.used_s,
            "billed_seconds": self.billed_s,
            "usd": None if self.usd is None else round(self.usd, 4),
            "wasted_seconds": self.wasted_s,
            "better_wall_clock_seconds": self.better_wall_clock_s,
        }

    def advice(self, wall_clock_s: float) -> str | None:
        """`3h10m on hetzner bills 4h00m: 3h40m trains 30 more minutes for the same money`."""
        if self.better_wall_clock_s is None:
            return None
        return (
            f"{human_duration(wall_clock_s)} on {self.provider} bills "
            f"{human_duration(self.billed_s)}: a wall clock of "
            f"{human_duration(self.better_wall_clock_s)} trains "
            f"{human_duration(self.better_wall_clock_s - wall_clock_s)} more for the same money"
        )


def bill(provider: str, wall_clock_s: float, overrun_s: float, hourly: float | None) -> Bill:
    """The worst case (wall clock plus overrun) as `provider` bills it. KeyError: unknown."""
    inc = INCREMENTS[provider]
    used = wall_clock_s + overrun_s
    billed = inc.billed_seconds(used)
    wasted = billed - used
    better = wall_clock_s + wasted if wasted >= WORTH_SAYING_S else None
    usd = None if hourly is None else hourly * billed / HOUR
    return Bill(provider, inc.words(), used, billed, usd, wasted, better)


def unrounded(wall_clock_s: float, overrun_s: float, hourly: float) -> Bill:
    """The worst case where the provider is not known yet (`finish.provider: auto`)."""
    used = wall_clock_s + overrun_s
    return Bill("unknown", "as the provider rounds it", used, used, hourly * used / HOUR, 0.0, None)
