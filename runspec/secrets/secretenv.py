"""Which environment variables hold secrets, and the environment a child gets without them.

The daemon's environment holds every secret the machine has (its EnvironmentFile): the Hub
token, and a provider's key that can destroy the machine. The finish alone needs a provider's
key. Of the children, the preflight needs the Hub token to ask a Hub dataset's size, to check a
Hub push target, or to build a model from a Hub repo (its profiler); the trainer needs it only
to fetch a model from a Hub repo (`owner/repo`, `hf://...`, a Hub URL): LibreYOLO's own
pretrained weights are public. Everything else a child gets is the daemon's own environment
less those secrets, less whatever systemd set for the daemon's unit alone.

Light: the daemon imports this.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from runspec.spec.model import Spec
from runspec.spec.modelnames import is_hub_model

HUB_TOKEN_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")

# What systemd sets for one unit: in a child, NOTIFY_SOCKET and WATCHDOG_* would let it speak
# for the daemon (NotifyAccess=main refuses that anyway) and the rest describe a unit it is not.
SERVICE_VARS = frozenset(
    {
        "NOTIFY_SOCKET",
        "WATCHDOG_USEC",
        "WATCHDOG_PID",
        "LISTEN_FDS",
        "LISTEN_PID",
        "LISTEN_FDNAMES",
        "INVOCATION_ID",
        "JOURNAL_STREAM",
        "SYSTEMD_EXEC_PID",
        "MANAGERPID",
        "MAINPID",
        "CREDENTIALS_DIRECTORY",
        "RUNTIME_DIRECTORY",
        "STATE_DIRECTORY",
        "CACHE_DIRECTORY",
        "LOGS_DIRECTORY",
        "CONFIGURATION_DIRECTORY",
        "TRIGGER_UNIT",
        "TRIGGER_PATH",
        "TRIGGER_TIMER_REALTIME_USEC",
        "TRIGGER_TIMER_MONOTONIC_USEC",
    }
)

# A name with one of these words says it holds a secret: a backstop for the keys no adapter
# knows (a user's own API key in the EnvironmentFile). Whole words, so TOKENIZERS_PARALLELISM
# is tuning, not a secret.
_SECRET_WORDS = frozenset(
    {"TOKEN", "SECRET", "KEY", "APIKEY", "PASSWORD", "PASSWD", "CREDENTIALS", "PRIVATE"}
)
# Shaped like secrets, but they only say where one is kept, or switch one off.
_NOT_SECRETS = frozenset({"HF_TOKEN_PATH", "HF_HUB_DISABLE_IMPLICIT_TOKEN"})
# Shorter values are not worth blanking in text: "1" or "true" would maim every log line.
MIN_SECRET_LEN = 8


def provider_secret_vars() -> frozenset[str]:
    """Every provider adapter's secret variables, from the registry itself."""
    # A dozen modules, imported when asked: `runspec --help` reads this module (the scrubber).
    from runspec.providers.detect import PROVIDERS  # noqa: PLC0415

    return frozenset(name for cls in PROVIDERS.values() for name in cls.secret_env)


def is_secret_name(name: str) -> bool:
    if name in HUB_TOKEN_VARS:
        return True
    if name in _NOT_SECRETS:
        return False
    return any(word in _SECRET_WORDS for word in name.upper().split("_"))


def secret_names(environ: Mapping[str, str]) -> frozenset[str]:
    """The names in `environ` that hold secrets: the Hub token, every provider's keys, and any
    name shaped like a secret."""
    providers = provider_secret_vars()
    return frozenset(name for name in environ if name in providers or is_secret_name(name))


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of those names (long enough to matter), longest first, for blanking text."""
    env = os.environ if environ is None else environ
    found = {env[name] for name in secret_names(env) if len(env[name]) >= MIN_SECRET_LEN}
    return sorted(found, key=len, reverse=True)


def child_environ(environ: Mapping[str, str], *, hub_token: bool) -> dict[str, str]:
    """`environ` less every secret and systemd's per-unit variables; the Hub token stays only
    when `hub_token` (a provider's key never does)."""
    drop = secret_names(environ) | SERVICE_VARS
    keep = set(HUB_TOKEN_VARS) if hub_token else set()
    return {k: v for k, v in environ.items() if k not in drop or k in keep}


def hub_token(environ: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if environ is None else environ
    return next((env[name] for name in HUB_TOKEN_VARS if env.get(name)), None)


def trainer_needs_hub_token(models: Iterable[object]) -> bool:
    """`models`: what the trainer builds or loads (train.model, train.args.distill_model)."""
    return any(is_hub_model(ref) for ref in models)


def spec_models(spec: Spec) -> list[object]:
    return [spec.train.model, spec.train.args.get("distill_model")]


def preflight_needs_hub_token(spec: Spec) -> bool:
    """The preflight asks the Hub a dataset's size, checks a Hub push target, and its profiler
    builds the model the trainer will."""
    push_hub = spec.push is not None and spec.push.hub is not None
    return spec.dataset.hub is not None or push_hub or trainer_needs_hub_token(spec_models(spec))
