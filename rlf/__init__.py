"""rlf: a PyTorch reinforcement-learning framework in the mould of ALF.

From Python: ``rlf.train(conf, ...)`` trains (``rlf.Run``), ``rlf.load_policy(root_dir)``
loads the policy (``rlf.Policy``: ``predict``, ``export``); see ``rlf.api``. They are
imported on first use, so that ``import rlf`` (and a tool's start, which Ctrl-C may
interrupt: ``rlf.bin``) stays light.
"""

from typing import Any

#: The release; ``CHANGELOG.md`` lists what each one changed for users.
__version__ = "0.4.0"

__all__ = ["Policy", "Run", "load_policy", "train", "__version__"]

_API = ("Policy", "Run", "load_policy", "train")


def __getattr__(name: str) -> Any:
    """``rlf.train``, ``rlf.load_policy``, ``rlf.Run`` and ``rlf.Policy``, from ``rlf.api``."""
    if name in _API:
        from rlf import api
        return getattr(api, name)
    raise AttributeError(f"module 'rlf' has no attribute {name!r}")
