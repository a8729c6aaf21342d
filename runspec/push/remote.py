"""The pushed side's layout: where a push puts runspec's own files at the target, the one
place these names are spelled (tests/test_layout_names.py). The weights and LibreYOLO's
files keep their paths from the run folder; the model card is README.md at the root."""

from __future__ import annotations

MANIFEST = "runspec/manifest.json"  # every push's manifest: which run, which files, verified
SPEC = "runspec/spec.yaml"  # the spec as received
PROVENANCE = "runspec/provenance.json"  # where the spec came from
RECORD = "runspec/record.json"  # every push: the run's record (runspec.push.hubrecord)
LOG = "runspec/runspec.log"  # the final push: the lifecycle's log
CURVES = "runspec/curves.png"  # the final push: the training curves, beside the card
LEASE = "runspec/lease.json"  # the lease a live run renews (issue 22), read by `status --hub`
RECEIPT = "runspec/receipt.json"  # the commit after the final push: the run's receipt
END = "runspec/end.json"  # the machine's end, confirmed after the receipt (push.endconfirm)
CLAIMS = "runspec/claims"  # a followed spec blob that ran: one file each (daemon.followclaim)
ATTEMPTS = "runspec/attempts.json"  # under an engine: the run's attempts (runspec.run.attempts)
# Set by `runspec run` once the attempt gate admitted this attempt, to the engine's task id
# ("" where it gives none): the run whose ledger the target holds (push.owner_check).
GATED_TASK = "RUNSPEC_GATED_TASK"
