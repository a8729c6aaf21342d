"""Provider adapters: stop or destroy the instance runspec runs on, through its provider's API."""

from runspec.providers.base import Action, Outcome, Provider, ProviderError
from runspec.providers.detect import PROVIDERS, detect, get_provider

__all__ = ["PROVIDERS", "Action", "Outcome", "Provider", "ProviderError", "detect", "get_provider"]
