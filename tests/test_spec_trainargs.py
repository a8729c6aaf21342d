"""`train.args` against the installed LibreYOLO's own `train` command.

LibreYOLO is slow to import, so its command is built once for the module. When a LibreYOLO
upgrade grows, drops or retypes an option, these tests name it; then update
runspec/spec/trainargs.py and regenerate the schema's train.args
(`python -m runspec.spec.trainargs`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from runspec.spec.trainargs import BY_KEY, ELSEWHERE, OPTIONS, normalise_key

OUTPUT_FLAGS = {"json", "quiet", "dry_run", "help_json"}
PYTHON_ONLY = {"sync_bn"}


@dataclasses.dataclass(frozen=True)
class CliOption:
    kind: str
    default: Any


@pytest.fixture(scope="module")
def libreyolo_train_options() -> dict[str, CliOption]:
    """The `libreyolo train` command's options as its click command declares them."""
    # Imported here, not at the top: collecting the suite must not pay LibreYOLO's import.
    import typer
    from libreyolo.cli.commands import train
    from libreyolo.cli.parsing import KeyValueCommand

    app = typer.Typer(add_completion=False)
    app.command("train", cls=KeyValueCommand)(train.train_cmd)
    command = typer.main.get_command(app)
    options: dict[str, CliOption] = {}
    for param in command.params:
        key = normalise_key(param.opts[0].removeprefix("--"))
        options[key] = CliOption(param.type_descriptor.annotation.__name__, param.default)
    return options


def test_the_list_holds_every_cli_option_but_the_output_flags_and_those_set_elsewhere(
    libreyolo_train_options: dict[str, CliOption],
) -> None:
    cli = set(libreyolo_train_options)
    ours = {o.key for o in OPTIONS}
    expected = (cli - OUTPUT_FLAGS - set(ELSEWHERE)) | PYTHON_ONLY
    assert sorted(ours - expected) == [], "in runspec's list, gone from libreyolo train"
    assert sorted(expected - ours) == [], "new in libreyolo train, missing from runspec"


def test_the_keys_kept_out_of_args_are_real_options(
    libreyolo_train_options: dict[str, CliOption],
) -> None:
    assert set(ELSEWHERE) <= set(libreyolo_train_options)
    assert set(ELSEWHERE) >= OUTPUT_FLAGS
    assert not set(ELSEWHERE) & set(BY_KEY)


def test_types_and_defaults_match_the_cli(libreyolo_train_options: dict[str, CliOption]) -> None:
    for option in OPTIONS:
        if option.key in PYTHON_ONLY:
            continue
        cli = libreyolo_train_options[option.key]
        assert (option.kind, option.default) == (cli.kind, cli.default), option.key


def test_sync_bn_is_a_python_only_training_option() -> None:
    from libreyolo.training.config import TrainConfig

    assert "sync_bn" in {f.name for f in dataclasses.fields(TrainConfig)}
