"""Batched TimeStep environments over gymnasium and ale-py; ``load`` is the entry point."""

from rlf.environments.atari import load_atari
from rlf.environments.gym_env import load_gym
from rlf.environments.loader import (UnknownEnvironmentError, find_spec, is_atari, load,
                                     load_configured)
from rlf.environments.spec_utils import spec_from_space
from rlf.environments.vector_environment import VectorEnvironment

__all__ = ["load", "load_configured", "find_spec", "is_atari", "UnknownEnvironmentError",
           "load_atari", "load_gym", "spec_from_space", "VectorEnvironment"]
