"""The machine's end keeps trying (issue 19.2): a provider that answers 500, 429 with
Retry-After, hangs, or never reaches `gone` does not leave the machine billing after one call.

Every request goes over real HTTP to the vast.ai stand-in (tests/fixtures_providers.py); the
endgame records each attempt in machine.json. A ManualClock makes the backoff instant where no
real timeout is under test.
"""

from __future__ import annotations

import json
from pathlib import Path

from runspec.clock import ManualClock, parse_utc_iso, utc_iso
from runspec.machine import failsafe
from runspec.machine.endgame import Endgame
from runspec.machine.finish import FinishResult
from runspec.machine.host import FinishHost
from runspec.providers.vast import Vast
from runspec.run.accept import accept
from runspec.spec.loader import load_spec
from runspec.spec.model import FinishAction, FinishSpec, Unverified
from runspec.store.finishrecord import EndAction, FinishRecord
from runspec.store.paths import StateLayout
from runspec.store.state import RecordStore, Termination
from tests.fixtures_providers import Answer, StandIn, VastInstance
from tests.fixtures_run import SpecWriter
from tests.test_machine_safety import ended

DESTROY = FinishSpec(action=FinishAction.DESTROY, provider="vast", unverified=Unverified.STOP)


def endgame(
    tmp_path: Path,
    env: dict[str, str],
    *,
    clock: ManualClock | None = None,
    timeout: float = 15.0,
    notify: tuple[str, ...] = (),
) -> tuple[Endgame, list[str]]:
    env = {**env, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": "k"}
    kw = {"clock": clock} if clock is not None else {}
    vast = Vast(env, timeout=timeout, confirm_timeout=3.0, poll_interval=0.1, **kw)  # type: ignore[arg-type]
    host = FinishHost(provider=vast, end_window=600.0, retry_base=0.2)
    said: list[str] = []
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    game = Endgame(StateLayout(state), host=host, say=said.append, notify=notify, **kw)  # type: ignore[arg-type]
    game.arm("a", DESTROY, hourly_cost=2.0, weights="", why="test")
    return game, said


def attempts(game: Endgame) -> list[dict[str, object]]:
    data = json.loads(game.layout.machine_file.read_text())
    return list(data["pending"]["attempts"])


def test_a_500_then_a_429_then_a_healthy_answer_destroys_the_machine(
    tmp_path: Path, standin: StandIn, provider_env: dict[str, str]
) -> None:
    VastInstance(
        standin,
        deletes=(
            Answer(500, "internal error"),
            Answer(429, "slow down", headers={"Retry-After": "40"}),
            Answer(200),
        ),
    )
    game, said = endgame(tmp_path, provider_env, clock=ManualClock())
    outcome = game.enter()
    assert outcome.result is not None and outcome.result.ok, said
    assert outcome.result.action == "destroy"
    assert len(standin.made("DELETE")) == 3 and standin.made("PUT") == []
    sent = [a for a in attempts(game) if a["sent"]]
    assert "HTTP 500" in str(sent[0]["answer"]) and "HTTP 429" in str(sent[1]["answer"])
    assert sent[-1]["answer"] == "accepted" and sent[-1]["confirmed"] is True
    # The third request waited at least as long as the 429's Retry-After asked.
    gap = parse_utc_iso(str(sent[2]["time"])) - parse_utc_iso(str(sent[1]["time"]))
    assert gap >= 40
    assert "STILL RUNNING" not in "\n".join(said)


def test_a_destroy_whose_answer_never_came_is_confirmed_not_sent_again(
    tmp_path: Path, standin: StandIn, provider_env: dict[str, str]
) -> None:
    VastInstance(standin, deletes=(Answer(200, delay=3.0),))  # done, but the answer hangs
    game, said = endgame(tmp_path, provider_env, timeout=0.5)
    outcome = game.enter()
    assert outcome.result is not None and outcome.result.ok, said
    assert outcome.result.action == "destroy"
    assert len(standin.made("DELETE")) == 1  # nothing requested twice
    assert "no answer within" in str(attempts(game)[0]["answer"])


def test_a_destroy_that_never_reaches_gone_falls_back_to_a_stop(
    tmp_path: Path, standin: StandIn, provider_env: dict[str, str]
) -> None:
    VastInstance(standin, never_gone=True)
    game, said = endgame(tmp_path, provider_env, clock=ManualClock())
    outcome = game.enter()
    assert outcome.result is not None and outcome.result.ok, said
    assert outcome.result.action == "stop"
    assert len(standin.made("DELETE")) > 1 and len(standin.made("PUT")) == 1
    assert any("stopping the machine instead" in line for line in said)
    pending = json.loads(game.layout.machine_file.read_text())["pending"]
    assert pending["step"] == "applied" and pending["action"] == "stop"


def test_a_permanent_refusal_is_said_at_once_and_the_stop_still_happens(
    tmp_path: Path, standin: StandIn, provider_env: dict[str, str]
) -> None:
    VastInstance(standin, deletes=(Answer(403, "this key may not destroy"),))
    standin.on("POST", r"/notify", Answer(200))
    hook = f"json://{standin.url.removeprefix('http://')}/notify"
    game, said = endgame(tmp_path, provider_env, clock=ManualClock(), notify=(hook,))
    outcome = game.enter()
    assert outcome.result is not None and outcome.result.ok, said
    assert outcome.result.action == "stop"
    assert len(standin.made("DELETE")) == 1  # refused for good: never asked again
    bodies = [r.body.decode() for r in standin.made("POST", r"/notify")]
    assert any("refused the destroy for good" in body and "HTTP 403" in body for body in bodies)


def test_a_stop_answered_500_is_tried_again_until_confirmed(
    tmp_path: Path, standin: StandIn, provider_env: dict[str, str]
) -> None:
    VastInstance(standin, puts=(Answer(500, "oops"), Answer(502, "bad gateway"), Answer(200)))
    game, said = endgame(tmp_path, provider_env, clock=ManualClock())
    stop = FinishSpec(action=FinishAction.STOP, provider="vast")
    game.arm("b", stop, hourly_cost=2.0, weights="", why="test")
    outcome = game.enter()
    assert outcome.result is not None and outcome.result.ok, said
    assert outcome.result.action == "stop" and len(standin.made("PUT")) == 3


def test_a_run_whose_end_was_never_confirmed_is_ended_by_its_failsafe(
    tmp_path: Path, write_spec: SpecWriter, standin: StandIn, provider_env: dict[str, str]
) -> None:
    state = tmp_path / "state"
    finish = {"action": "destroy", "provider": "vast", "unverified": "stop"}
    push = {"dir": str(tmp_path / "volume")}
    accept(load_spec(write_spec("a", finish=finish, push=push)), state)
    store = RecordStore(state)
    record = ended(store, "a", Termination.COMPLETED)
    # What a destroy that ran out of tries leaves: the run finished, the machine not ended.
    ran_out = FinishResult(
        "destroy", EndAction.DESTROY, True, False, False, "DELETE", "not confirmed"
    )
    record.finish = FinishRecord.applied(ran_out)
    store.save(record)
    assert failsafe.should_fire(record)[0]

    VastInstance(standin)
    env = {**provider_env, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": "k"}
    vast = Vast(env, confirm_timeout=3.0, poll_interval=0.1)
    said: list[str] = []
    host = FinishHost(provider=vast, end_window=60.0, retry_base=0.2)
    assert failsafe.fire(state, "a", host=host, progress=said.append) == 0, said
    assert len(standin.made("DELETE")) == 1


def _run_ending_at(
    tmp_path: Path, write_spec: SpecWriter, clock: ManualClock, deadline_in: float
) -> Path:
    """Run `a` accepted, finished, with its deadline `deadline_in` s from the clock's now (its
    spec's budget.overrun is 20 m)."""
    state = tmp_path / "state"
    finish = {"action": "destroy", "provider": "vast", "unverified": "stop"}
    budget = {"wall_clock": "1h", "overrun": "20m"}
    push = {"dir": str(tmp_path / "volume")}
    accept(load_spec(write_spec("a", finish=finish, budget=budget, push=push)), state)
    store = RecordStore(state)
    record = ended(store, "a", Termination.COMPLETED)
    record.deadline = utc_iso(clock.time() + deadline_in)
    store.save(record)
    return state


def _end_that_keeps_failing(
    state: Path, standin: StandIn, env: dict[str, str], clock: ManualClock
) -> tuple[Endgame, list[str]]:
    VastInstance(standin, deletes=(Answer(500, "down"),), puts=(Answer(503, "down"),))
    env = {**env, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": "k"}
    vast = Vast(env, confirm_timeout=3.0, poll_interval=0.1, clock=clock)
    said: list[str] = []
    game = Endgame(StateLayout(state), host=FinishHost(provider=vast), say=said.append, clock=clock)
    game.arm("a", DESTROY, hourly_cost=2.0, weights="", why="test")
    return game, said


def test_the_end_keeps_trying_until_the_deadline_plus_the_overrun_not_a_fixed_half_hour(
    tmp_path: Path, write_spec: SpecWriter, standin: StandIn, provider_env: dict[str, str]
) -> None:
    # The run ended 2 h before its deadline: its budget pays for tries until deadline + 20 m.
    clock = ManualClock()
    state = _run_ending_at(tmp_path, write_spec, clock, deadline_in=2 * 3600)
    game, said = _end_that_keeps_failing(state, standin, provider_env, clock)
    start = clock.time()
    outcome = game.enter()
    assert outcome.result is not None and not outcome.result.ok, said
    tried = [parse_utc_iso(str(a["time"])) for a in attempts(game) if a["sent"]]
    assert max(tried) - start > 2 * 3600  # still asking past a fixed 30 min
    assert max(tried) <= start + 2 * 3600 + 20 * 60  # and never past deadline + overrun


def test_an_end_reached_at_the_deadline_stops_trying_at_the_overrun(
    tmp_path: Path, write_spec: SpecWriter, standin: StandIn, provider_env: dict[str, str]
) -> None:
    # The budget stop: the run ends at its deadline, so the overrun (20 m) is what is left.
    clock = ManualClock()
    state = _run_ending_at(tmp_path, write_spec, clock, deadline_in=0.0)
    game, said = _end_that_keeps_failing(state, standin, provider_env, clock)
    start = clock.time()
    outcome = game.enter()
    assert outcome.result is not None and not outcome.result.ok, said
    tried = [parse_utc_iso(str(a["time"])) for a in attempts(game) if a["sent"]]
    assert max(tried) <= start + 20 * 60 < start + 1800
    assert max(tried) - start > 10 * 60


def test_an_end_past_the_deadline_plus_the_overrun_still_tries_for_a_while(
    tmp_path: Path, write_spec: SpecWriter, standin: StandIn, provider_env: dict[str, str]
) -> None:
    # What the failsafe meets: the budget's window is spent, yet nobody else will ask.
    clock = ManualClock()
    state = _run_ending_at(tmp_path, write_spec, clock, deadline_in=-3600.0)
    game, said = _end_that_keeps_failing(state, standin, provider_env, clock)
    start = clock.time()
    outcome = game.enter()
    assert outcome.result is not None and not outcome.result.ok, said
    tried = [parse_utc_iso(str(a["time"])) for a in attempts(game) if a["sent"]]
    assert len(tried) > 2 and start + 60 < max(tried) <= start + FinishHost.least_window


def test_the_failsafe_past_the_overrun_keeps_asking_for_the_whole_end_window(
    tmp_path: Path, write_spec: SpecWriter, standin: StandIn, provider_env: dict[str, str]
) -> None:
    # The failsafe fires after deadline + overrun, when nobody else will ever ask again: a
    # provider down for ten minutes must not leave the machine billing after five.
    clock = ManualClock()
    state = _run_ending_at(tmp_path, write_spec, clock, deadline_in=-3600.0)
    store = RecordStore(state)
    record = store.load("a")
    assert record is not None
    ran_out = FinishResult(
        "destroy", EndAction.DESTROY, True, False, False, "DELETE", "not confirmed"
    )
    record.finish = FinishRecord.applied(ran_out)
    store.save(record)
    VastInstance(standin, deletes=(Answer(500, "down"),), puts=(Answer(503, "down"),))
    env = {**provider_env, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": "k"}
    vast = Vast(env, confirm_timeout=3.0, poll_interval=0.1, clock=clock)
    said: list[str] = []
    start = clock.time()
    code = failsafe.fire(
        state, "a", clock=clock, host=FinishHost(provider=vast), progress=said.append
    )
    assert code == 1, said
    game = Endgame(StateLayout(state), say=said.append)
    tried = [parse_utc_iso(str(a["time"])) for a in attempts(game) if a["sent"]]
    assert max(tried) - start > FinishHost.least_window, said  # past an on-box end's floor
    assert max(tried) <= start + FinishHost.end_window


def test_the_failsafe_never_runs_a_command_that_machine_json_names_and_its_spec_does_not(
    tmp_path: Path, write_spec: SpecWriter, standin: StandIn, provider_env: dict[str, str]
) -> None:
    """Outside systemd, without CAP_SYS_ADMIN, a trainer may write machine.json: an end it
    says was under way is finished only as far as the armed spec (its sha256 checked) goes;
    a command it names is never run as root beside the provider keys."""
    from runspec.machine.machinefile import load_pending, save_pending

    state = tmp_path / "state"
    finish = {"action": "destroy", "provider": "vast", "unverified": "stop"}
    accept(load_spec(write_spec("a", finish=finish, push={"dir": str(tmp_path / "v")})), state)
    store = RecordStore(state)
    record = ended(store, "a", Termination.COMPLETED)
    ran_out = FinishResult(
        "destroy", EndAction.DESTROY, True, False, False, "DELETE", "not confirmed"
    )
    record.finish = FinishRecord.applied(ran_out)
    store.save(record)
    marker = tmp_path / "planted-ran"
    layout = StateLayout(state)
    planted = FinishSpec(action=FinishAction.COMMAND, command=("touch", str(marker)))
    Endgame(layout).arm("a", planted, hourly_cost=None, weights="", why="planted")
    pending = load_pending(layout)
    assert pending is not None
    pending.step, pending.action = "applying", "command"
    save_pending(layout, pending, "planted by the trainer", ManualClock())

    VastInstance(standin)
    env = {**provider_env, "CONTAINER_ID": "4242", "CONTAINER_API_KEY": "k"}
    host = FinishHost(provider=Vast(env, confirm_timeout=3.0, poll_interval=0.1), end_window=60.0)
    said: list[str] = []
    failsafe.fire(state, "a", host=host, progress=said.append)
    assert not marker.exists(), said
    assert standin.made("PUT") or standin.made("DELETE"), said  # the armed finish, instead
