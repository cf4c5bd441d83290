"""Providers, one module each; each is imported only when a profile uses it (the SDKs are slow to load)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from engine.models.base import Generator
from engine.models.providers.mock import MockGenerator
from engine.models.script import MockScript
from engine.spec import ModelProfile

PROVIDERS = ("openai", "azure", "anthropic", "google", "mock")


def make_generator(profile: ModelProfile, name: str, env: Mapping[str, str], *,
                   run_script: MockScript | None = None) -> Generator:
    """The generator for a profile. A run script sends every call to the mock, whatever the provider."""
    if run_script is not None or profile.provider == "mock":
        mock_profile = profile if profile.provider == "mock" else ModelProfile(provider="mock")
        return MockGenerator(mock_profile, run_script=run_script)
    module = importlib.import_module(f"engine.models.providers.{profile.provider}")
    generator: Generator = module.make(profile, name, env)
    return generator
