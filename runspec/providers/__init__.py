"""Provider adapters: stop or destroy the instance runspec runs on, through its provider's API."""

from runspec.providers.base import Action, Provider, ProviderError, ProviderOutcome
from runspec.providers.detect import PROVIDERS, detect, get_provider

__all__ = [
    "PROVIDERS",
    "Action",
    "Provider",
    "ProviderError",
    "ProviderOutcome",
    "detect",
    "get_provider",
]
