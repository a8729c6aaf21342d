"""The model card says what happened, in the summary's own words: one cost figure in both, and
the image size LibreYOLO actually trained at (issue 23's polish), through a real `runspec run`."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.fixtures_run import SpecWriter, finish_run, start_run


def test_card_and_summary_say_one_cost_and_the_trained_image_size(
    tmp_path: Path, write_spec: SpecWriter
) -> None:
    spec = write_spec(
        "costed",
        epochs=1,
        # 40 is no multiple of the model's stride: LibreYOLO trains at a rounded size.
        train={"imgsz": 40},
        push={"dir": str(tmp_path / "volume")},
        budget={"wall_clock": "30m", "hourly_cost": 3.6},
    )
    state = tmp_path / "state"
    code, out = finish_run(start_run(spec, state), timeout=400)
    assert code == 0, out
    card = (tmp_path / "volume" / "costed" / "README.md").read_text()
    in_card = re.search(r"this run cost (\$[0-9.]+ at \$3\.6/h)", card)
    in_summary = re.search(r"billed, (\$[0-9.]+ at \$3\.6/h)", out)
    assert in_card is not None, card
    assert in_summary is not None, out
    assert in_card.group(1) == in_summary.group(1)
    assert in_card.group(1) != "$0.0000 at $3.6/h"  # a run of seconds still costs something
    config = yaml.safe_load((state / "runs" / "costed" / "train_config.yaml").read_text())
    assert config["imgsz"] != 40, config
    assert f"| image size | {config['imgsz']} (the spec asked 40) |" in card, card
