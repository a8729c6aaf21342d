"""A spec's env cannot move the trainer's writes or its requests (issue 18, item 4): path-valued
names obey the rule of run, push and data folders, and every variable huggingface_hub reads
that changes where its requests go is refused. The list of huggingface_hub's variables is read
from its own source, so a new one fails here until it is classified."""

from __future__ import annotations

import ast
from pathlib import Path

import huggingface_hub
import pytest

from runspec.spec.envpaths import is_path_valued
from runspec.spec.loader import check_spec_text
from runspec.spec.rules import forbidden_env
from tests.fixtures_daemon import spec_text

# Read by huggingface_hub, changing nothing about where a request goes or what is written.
HARMLESS = frozenset(
    {
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HF_HUB_DISABLE_UPDATE_CHECK",
        "HF_DEBUG",
        "HF_HUB_DISABLE_TELEMETRY",
        "DISABLE_TELEMETRY",
        "DO_NOT_TRACK",
        "HF_HUB_DISABLE_PROGRESS_BARS",
        "HF_HUB_DISABLE_SYMLINKS",
        "HF_HUB_DISABLE_SYMLINKS_WARNING",
        "HF_HUB_DISABLE_EXPERIMENTAL_WARNING",
        "HF_HUB_DISABLE_IMPLICIT_TOKEN",
        "HF_XET_HIGH_PERFORMANCE",
        "HF_HUB_ENABLE_HF_TRANSFER",
        "HF_HUB_ETAG_TIMEOUT",
        "HF_HUB_DOWNLOAD_TIMEOUT",
        "HF_HUB_USER_AGENT_ORIGIN",
        "OAUTH_CLIENT_ID",
        "OAUTH_SCOPES",
        "HF_DEVICE_CODE_OAUTH_CLIENT_ID",
        "HF_HUB_DISABLE_XET",
        "HF_HUB_DISABLE_SHARED_BLOBS",
        "HF_HUB_VERBOSITY",
        "NO_COLOR",
        "SHELL",
        "SPACE_ID",
        "SPACE_HOST",
        "COLAB_ENTERPRISE",
        "VERTEX_PRODUCT",
        "GITHUB_ACTIONS",
        "TQDM_POSITION",
        "EAGER_IMPORT",
    }
)


def _read_by_huggingface_hub() -> set[str]:
    """Every literal name the package reads with os.getenv / os.environ.get / os.environ[...]."""
    names: set[str] = set()
    for source in Path(huggingface_hub.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            first = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
                if (
                    node.func.attr in ("getenv", "get") and "environ" in ast.unparse(node.func)
                ) or node.func.attr == "getenv":
                    first = node.args[0]
            elif isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("environ"):
                first = node.slice
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value:
                names.add(first.value)
    return names


def _refusal(name: str, value: str = "1") -> str | None:
    text = spec_text("envs", extra=f"env:\n  {name}: {value!r}\n")
    _, problems = check_spec_text(text, "envs.yaml")
    return "; ".join(p.message for p in problems) or None


def test_every_variable_huggingface_hub_reads_is_classified() -> None:
    read = _read_by_huggingface_hub()
    assert "HF_ENDPOINT" in read and "HF_HOME" in read  # the scan sees what it must
    unknown = sorted(
        name
        for name in read
        if name not in HARMLESS
        and forbidden_env(name) is None
        and not is_path_valued(name)
        # a name refused as a secret (HF_TOKEN, WEBHOOK_SECRET, ...) is refused anyway
        and _refusal(name) is None
    )
    assert unknown == [], f"classify these huggingface_hub variables: {unknown}"


@pytest.mark.parametrize(
    "name", ["HF_ENDPOINT", "HUGGINGFACE_CO_STAGING", "HF_INFERENCE_ENDPOINT", "HF_TOKEN_PATH"]
)
def test_a_variable_that_moves_the_hubs_requests_is_refused(name: str) -> None:
    refused = _refusal(name, "https://elsewhere.example")
    assert refused is not None and "where the trainer's traffic or the Hub token goes" in refused


@pytest.mark.parametrize("name", ["HF_HOME", "HF_HUB_CACHE", "TORCH_HOME", "XDG_CACHE_HOME"])
@pytest.mark.parametrize(
    "value", ["/", "/etc", "/boot/hf", "/var/lib/runspec", "/var/lib/runspec/jobs", "cache"]
)
def test_a_cache_folder_obeys_the_folder_rule(name: str, value: str) -> None:
    refused = _refusal(name, value)
    assert refused is not None and name in refused


@pytest.mark.parametrize("name", ["HF_HOME", "TORCH_HOME", "MY_TOOL_CACHE"])
@pytest.mark.parametrize(
    "value",
    [
        "/workspace/hf",
        "~/.cache/hf",
        "/root/.cache/huggingface",
        "/mnt/volume/hf",
        "/tmp/hf",
        "/opt/dlami/nvme/hf",
        "/lambda/nfs/my-fs/hf",
    ],
)
def test_a_cache_folder_of_its_own_is_accepted(name: str, value: str) -> None:
    assert _refusal(name, value) is None


# Issue 34: a deny list of system folders let the trainer's sandbox write the login's keys,
# the shell's startup files or a folder on root's PATH (~/bin): an env folder must lie where
# caches and data belong (a volume, a cache home, /tmp) or in a folder the run writes anyway.
@pytest.mark.parametrize("name", ["HF_HOME", "TORCH_HOME", "XDG_CONFIG_HOME", "MY_TOOL_CACHE"])
@pytest.mark.parametrize(
    "value", ["/root/.ssh", "~/.ssh", "~/bin", "~", "/home/ubuntu/.config", "/opt/conda", "/srv"]
)
def test_a_folder_outside_the_allow_list_is_refused(name: str, value: str) -> None:
    refused = _refusal(name, value)
    assert refused is not None and name in refused
    assert "/workspace" in refused  # the fix names where it may go


def test_a_folder_of_the_state_folder_is_accepted_but_not_under_output_project() -> None:
    inside = spec_text("envs", extra="env:\n  HF_HOME: /var/lib/runspec/hf\n")
    assert check_spec_text(inside, "envs.yaml")[1] == []
    # output.project may be /root; that must not open /root/.ssh to the trainer.
    text = spec_text("envs", extra="output:\n  project: /root\nenv:\n  HF_HOME: /root/.ssh\n")
    [problem] = check_spec_text(text, "envs.yaml")[1]
    assert "HF_HOME '/root/.ssh' is not a folder for caches or data" in problem.message
