"""``ActorSetup``: what an actor process does before it builds its environment and algorithm.

The trainer hands it to the actor unrollers as a plain picklable callable, so the unrollers
know nothing of gin or of the command line: the actor applies the process settings
(``rlf.runtime.configure_process``) and re-parses the learner's gin configuration, so that
gin-built algorithms and environments match the learner's.
"""

from __future__ import annotations

from typing import Optional

from rlf.runtime import configure_process

__all__ = ["ActorSetup"]


class ActorSetup:
    """Called first in every actor process (``build_actor``'s ``setup``).

    Args:
        gin_config: the learner's gin bindings (``gin.config_str()``); "" for none.
        num_threads: torch threads of the actor.
        flush_denormal: ``torch.set_flush_denormal`` in the actor.
        niceness: nice levels below the learner (``TrainerConfig.actor_niceness``), applied
            before the environment starts its threads.
        deterministic: deterministic torch algorithms (``TrainerConfig.deterministic``).
    """

    def __init__(self, gin_config: str = "", num_threads: Optional[int] = 1,
                 flush_denormal: Optional[bool] = True, niceness: int = 0,
                 deterministic: bool = False):
        self.gin_config = gin_config
        self.num_threads, self.flush_denormal = num_threads, flush_denormal
        self.niceness = niceness
        self.deterministic = deterministic

    def __call__(self) -> None:
        configure_process(num_threads=self.num_threads, flush_denormal=self.flush_denormal,
                          niceness=self.niceness, deterministic=self.deterministic)
        if self.gin_config:
            import gin

            from rlf.trainers.registry import register_configurables
            register_configurables()
            gin.parse_config(self.gin_config)
