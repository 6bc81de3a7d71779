"""``register_configurables``: imports every rlf module that defines gin configurables."""

from __future__ import annotations

__all__ = ["register_configurables"]


def register_configurables() -> None:
    """Imports the rlf packages whose modules register gin configurables (algorithms,
    environments, networks, replay), so that a gin file can name them."""
    import rlf.algorithms  # noqa: F401
    import rlf.environments  # noqa: F401
    import rlf.networks  # noqa: F401
    import rlf.replay  # noqa: F401
