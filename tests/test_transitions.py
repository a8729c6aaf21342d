"""One way a status changes (issue 38): the transition table names every move, the moves back
(resume, refinish, rebuild) by name; no module outside runspec.store.state changes a status or
its history by hand; a rebuilt record keeps the run's deadline."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import runspec
from runspec.clock import ManualClock, utc_iso
from runspec.run.accept import accept
from runspec.run.rebuild import rebuilt_record
from runspec.spec.loader import load_accepted
from runspec.store.entries import Fit, HistoryEntry
from runspec.store.finishrecord import EndAction
from runspec.store.paths import RunPaths
from runspec.store.state import (
    BACKWARD,
    Damaged,
    DiskFull,
    RecordStore,
    Reopen,
    RunRecord,
    RunStatus,
    Terminal,
    TransitionError,
    unnamed_edges,
)
from runspec.trainer import control
from runspec.trainer.control import TrainJob
from tests.fixtures_run import SpecWriter

S = RunStatus
OWNER = Path(runspec.__file__).parent / "store" / "state.py"
FIELDS = {"status", "history"}


def by_hand(root: Path) -> list[str]:
    """Every place under `root` (but runspec.store.state) that sets a record's status or its
    history itself: an assignment to `.status`/`.history` on anything but `self`, an append
    to a history, `status=`/`history=` given to RunRecord or dataclasses.replace, setattr."""
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        if path.resolve() == OWNER.resolve():
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = [t for tgt in node.targets for t in _flat(tgt)]
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = _flat(node.target)
            for target in targets:
                if (
                    isinstance(target, ast.Attribute)
                    and target.attr in FIELDS
                    and not (isinstance(target.value, ast.Name) and target.value.id == "self")
                ):
                    found.append(f"{where}: .{target.attr} =")
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Attribute)
                and func.value.attr == "history"
            ):
                found.append(f"{where}: history.{func.attr}()")
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("RunRecord", "replace"):
                found += [f"{where}: {k.arg}=" for k in node.keywords if k.arg in FIELDS]
            if name == "setattr" and len(node.args) > 1:
                key = node.args[1]
                if isinstance(key, ast.Constant) and key.value in FIELDS:
                    found.append(f"{where}: setattr {key.value}")
    return found


def _flat(target: ast.expr) -> list[ast.expr]:
    if isinstance(target, ast.Tuple | ast.List):
        return [t for elt in target.elts for t in _flat(elt)]
    return [target]


def test_no_module_outside_the_store_changes_a_status_by_hand() -> None:
    assert by_hand(Path(runspec.__file__).parent) == []


def test_the_scan_finds_a_status_set_by_hand(tmp_path: Path) -> None:
    """The scan above can fail: each way around the transition function is found."""
    (tmp_path / "back_door.py").write_text(
        "record.status = 'training'\n"
        "record.status, record.reason = 'finishing', 'x'\n"
        "record.history.append({})\n"
        "RunRecord(name='a', spec_sha256='b', status='finished')\n"
        "self.record.status = 'queued'\n"
        "self.status = 200  # an HTTP answer's own status: not a record's\n"
    )
    assert len(by_hand(tmp_path)) == 5, by_hand(tmp_path)


@pytest.mark.parametrize(
    ("old", "new", "via"),
    [
        (S.FINISHED, S.TRAINING, Reopen.RESUME),
        (S.STOPPING, S.PREFLIGHT, Reopen.RESUME),
        (S.PUSHING, S.PUSHING, Reopen.RESUME),
        (S.FINISHED, S.FINISHING, Reopen.REFINISH),
        (S.QUEUED, S.TRAINING, Reopen.REBUILD),
    ],
)
def test_a_move_back_is_taken_only_by_its_name(
    tmp_path: Path, old: RunStatus, new: RunStatus, via: Reopen
) -> None:
    store = RecordStore(tmp_path, ManualClock(1_800_000_000.0))
    record = RunRecord(name="r", spec_sha256="0" * 64)
    record.status = old  # the case set up as an older move left it
    with pytest.raises(TransitionError, match=f"{old.value} -> {new.value} is not allowed"):
        store.transition(record, new, "by no name")
    other = next(r for r in Reopen if (old, new) not in BACKWARD[r])
    with pytest.raises(TransitionError, match=f"by {other.value}"):
        store.transition(record, new, "by another name", via=other)
    store.transition(record, new, "named", via=via)
    saved = store.load("r")
    assert saved is not None and saved.status is new and saved.ended_at is None
    assert saved.history[-1].via == via.value and unnamed_edges(saved.history) == []


def test_an_older_record_loads_and_its_unnamed_moves_are_found() -> None:
    """A record an older runspec wrote (no `via`, the rebuild's "damaged" status) still loads;
    the moves it made by hand are the ones the table does not name."""
    old = {
        "name": "r",
        "spec_sha256": "0" * 64,
        "status": "finishing",
        "finish": {"step": "applying", "action": "stop"},
        "history": [
            {"time": "t", "from": "damaged", "to": "training", "reason": "rebuilt"},
            {"time": "t", "from": "training", "to": "pushing", "reason": "stopped"},
            {"time": "t", "from": "finished", "to": "finishing", "reason": "push --finish"},
        ],
    }
    old["terminal"] = {"reason": "dataset: no repo org/x", "at": "2026-12-01T00:00:00+00:00"}
    old["rebuilt"] = {"reason": "truncated", "kept_as": "record.damaged-x.json", "at": "t"}
    record = RunRecord.from_json(json.loads(json.dumps(old)))
    assert record.status is S.FINISHING and record.finish is not None
    assert record.finish.action is EndAction.STOP
    assert record.to_json()["finish"]["action"] == "stop"
    assert [h.old for h in unnamed_edges(record.history)] == ["damaged", "finished"]
    # The marks are typed, and written back as the same objects.
    assert record.terminal == Terminal("dataset: no repo org/x", "2026-12-01T00:00:00+00:00")
    assert record.rebuilt is not None and record.rebuilt.kept_as == "record.damaged-x.json"
    assert record.to_json()["terminal"] == old["terminal"]
    for hostile in ({"reason": 5, "at": "t"}, {"reason": "x"}, "failed", [1]):
        with pytest.raises(TypeError, match="terminal"):
            RunRecord.from_json({**old, "terminal": hostile})
    full = {"path": "/data", "needed": 35_000_000, "free": 0, "since": "t", "what": "staging"}
    record = RunRecord.from_json({**old, "disk_full": full})
    assert record.disk_full == DiskFull("/data", 35_000_000, 0, "t", "staging")
    assert record.to_json()["disk_full"] == full
    for hostile in ({**full, "needed": [1]}, {**full, "free": "lots"}, {"path": "/data"}):
        with pytest.raises(TypeError, match="disk_full"):
            RunRecord.from_json({**old, "disk_full": hostile})
    cost = {"billed_s": 600.0, "usd": 0.5, "gpu_idle_s": 60.0, "idle_by_status": {"pushing": 60.0}}
    record = RunRecord.from_json({**old, "cost": cost})
    assert record.cost is not None and record.cost.usd == 0.5 and record.to_json()["cost"] == cost
    older = RunRecord.from_json({**old, "cost": {"billed_s": 600.0, "usd": None}}).cost
    assert older is not None and older.usd is None and older.idle_by_status == {}
    for hostile in ({**cost, "usd": "free"}, {**cost, "idle_by_status": {"x": True}}, {"usd": 1}):
        with pytest.raises(TypeError, match="cost"):
            RunRecord.from_json({**old, "cost": hostile})


def test_the_fit_and_the_history_are_typed_read_strictly_and_written_as_before(
    tmp_path: Path,
) -> None:
    """`fit` and `history` are typed (store.entries), read strictly as outside data (a record
    comes back from the Hub too), and written as the same JSON objects an older runspec wrote
    and reads."""
    steps = [
        {"time": "2026-12-01T00:00:00+00:00", "from": "queued", "to": "preflight", "reason": "a"},
        {
            "time": "2026-12-01T00:10:00+00:00",
            "from": "finished",
            "to": "training",
            "reason": "resumed",
            "via": "resume",
        },
    ]
    old = {"name": "r", "spec_sha256": "0" * 64, "status": "training", "history": steps}
    old["fit"] = {"epochs": 14, "of": 40, "epoch_s": 2.5}  # an older record: no save_s
    record = RunRecord.from_json(json.loads(json.dumps(old)))
    assert record.fit == Fit(epochs=14, of=40, epoch_s=2.5, save_s=0.0)
    assert "training 14, the schedule fitted" in record.fit.line()
    assert record.history[1] == HistoryEntry(
        steps[1]["time"], "finished", "training", "resumed", via="resume"
    )
    back = record.to_json()
    assert back["history"] == steps and back["fit"] == {**old["fit"], "save_s": 0.0}
    store = RecordStore(tmp_path)
    store.save(record)
    assert store.load("r") == record
    for fit in (
        {**old["fit"], "epochs": "14"},
        {**old["fit"], "of": True},
        {"epochs": 3},
        {**old["fit"], "lr": 0.1},
        {**old["fit"], "epoch_s": None},
        [14],
        "14",
    ):
        with pytest.raises(TypeError, match="fit"):
            RunRecord.from_json({**old, "fit": fit})
    for entry in (
        {**steps[0], "time": 5},
        {**steps[0], "via": ["resume"]},
        {"from": "queued"},
        {**steps[0], "by": "hand"},
        "queued -> preflight",
        None,
    ):
        with pytest.raises(TypeError, match="history entry"):
            RunRecord.from_json({**old, "history": [steps[0], entry]})
    # A record with neither (no fit planned, a record made before its first move) still loads.
    bare = RunRecord.from_json({"name": "r", "spec_sha256": "0" * 64, "fit": None})
    assert bare.fit is None and bare.history == [] and bare.to_json()["fit"] is None


def _job_folder(write_spec: SpecWriter, tmp_path: Path) -> RunPaths:
    spec = load_accepted(write_spec("mended", epochs=5))
    state = tmp_path / "state"
    accept(spec, state)
    paths = RunPaths.load(state, "mended")
    data = tmp_path / "data.yaml"
    data.write_text("path: .\n")
    TrainJob.from_spec(spec, paths, data).write(paths.train_job_file)
    paths.control_dir.mkdir(parents=True, exist_ok=True)
    return paths


def test_a_rebuilt_record_keeps_the_runs_deadline(write_spec: SpecWriter, tmp_path: Path) -> None:
    """The trainer stops a reserve before the run's deadline; the rebuilt record's deadline
    is the run's (an older folder without it: the stop time, the earlier end)."""
    paths = _job_folder(write_spec, tmp_path)
    clock = ManualClock(1_800_000_000.0)
    deadline, stop = 1_800_003_600.0, 1_800_003_000.0
    damaged = Damaged("mended", "truncated", "record.damaged-x.json", utc_iso(clock.time()))
    control.write_deadline(paths.control_dir, stop, {}, deadline)
    record = rebuilt_record(paths, clock, damaged)
    assert record.deadline == utc_iso(deadline)
    assert record.started_at == utc_iso(deadline - 1800)  # the spec's 30m wall clock
    assert record.status is S.TRAINING and unnamed_edges(record.history) == []
    assert record.termination is None and record.rebuilt is not None
    for hostile in ("soon", float("nan"), True, None):
        text = json.dumps({"deadline": stop, "run_deadline": hostile})
        (paths.control_dir / control.DEADLINE_FILE).write_text(text)
        assert rebuilt_record(paths, clock, damaged).deadline == utc_iso(stop), hostile
