"""The machine's end is decided once, with the provider resolved (issue 20): `auto` on a
provider that cannot stop announces the destroy it then does, through the endgame."""

from __future__ import annotations

from pathlib import Path

from runspec.machine.endgame import Endgame
from runspec.machine.host import FinishHost
from runspec.run.accept import accept
from runspec.spec.loader import load_spec
from runspec.store.owner import RunOwner
from runspec.store.paths import StateLayout
from runspec.store.state import RecordStore, RunStatus, Termination
from tests.fixtures_providers import Answer, StandIn
from tests.fixtures_run import SpecWriter
from tests.test_machine_safety import push_final, pushed, trained

TERMINATE = r"/api/v1/instance-operations/terminate"


def test_auto_on_a_provider_that_cannot_stop_says_destroy_and_destroys(
    tmp_path: Path, write_spec: SpecWriter, standin: StandIn, provider_env: dict[str, str]
) -> None:
    state = tmp_path / "state"
    # Back within an hour, a cheap disk: on a provider that can stop, auto would stop.
    storage = {
        "allocated_gb": 100,
        "usd_per_gb_month": 0.1,
        "rebuild_usd": 5,
        "return_within": "1h",
    }
    finish = {"action": "auto", "provider": "lambda", "storage": storage}
    spec_file = write_spec("auto", finish=finish, push={"dir": str(tmp_path / "volume")})
    spec = load_spec(spec_file)
    accept(spec, state)
    layout = StateLayout(state)
    paths = layout.run_paths("auto")
    trained(paths, 2)
    push_final(state, "auto")
    store = RecordStore(state)
    record = pushed(store, "auto", Termination.COMPLETED)
    store.transition(record, RunStatus.FINISHING, "test")

    standin.on("POST", TERMINATE, Answer(200, {"data": {}}))

    def instance() -> Answer:
        status = "terminated" if standin.made("POST", TERMINATE) else "active"
        return Answer(200, {"data": {"status": status}})

    standin.answer_with("GET", r"/api/v1/instances/abc", instance)
    standin.on("POST", r"/notify", Answer(200))
    env = {**provider_env, "RUNSPEC_LAMBDA_INSTANCE_ID": "abc", "LAMBDA_API_KEY": "k"}
    hook = f"json://{standin.url.removeprefix('http://')}/notify"
    said: list[str] = []
    host = FinishHost(env=env, end_window=60.0, retry_base=0.2)
    game = Endgame(layout, host=host, say=said.append, notify=(hook,))
    game.finish_run(spec, paths, RunOwner(store, record))

    assert len(standin.made("POST", TERMINATE)) == 1
    record = store.load("auto")
    finish = record.finish.result if record is not None and record.finish else None
    assert finish is not None and finish.action == "destroy" and finish.ok
    bodies = [r.body.decode() for r in standin.made("POST", r"/notify")]
    assert any("finish: destroy" in body for body in bodies), bodies
    assert not any("finish: stop" in body for body in bodies), bodies
