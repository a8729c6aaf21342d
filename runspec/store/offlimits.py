"""What a walled child (the trainer, the preflight's child) must never see: the keys' folder,
the inbox and the claimed specs (a spec written there runs its finish.command as the daemon),
and the machine's end. One list for the trainer's unit, the preflight's unit, and the
preflight child's own mount namespace outside systemd."""

from __future__ import annotations

from pathlib import Path

from runspec.store.paths import StateLayout

# Root's files that uid 0 reads even without a capability: the daemon's environment file
# (provider keys, the token) and its config.
SECRET_FOLDERS = (Path("/etc/runspec"),)


def off_limits(layout: StateLayout) -> list[Path]:
    return [*SECRET_FOLDERS, layout.inbox, layout.claimed, layout.machine_file, layout.machine_lock]


def layout_of_control_dir(control_dir: Path) -> StateLayout:
    """The state folder's layout from a run's control folder (<state>/jobs/<name>/control,
    RunPaths.control_dir): what a trainer knows of it from its job."""
    return StateLayout(control_dir.absolute().parents[2])
