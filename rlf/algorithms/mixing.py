"""Mixing: sequences from second sources appended to each training mini-batch, one mechanism
for all of them: hybrid training's offline data, IMPALA's experience replay (Espeholt et al.
2018, §5.3.2), sequences made by a learned model (Dyna).

A source is an ``ExperienceSource``: the data path makes one of the offline data, an algorithm
declares its own (``Algorithm.experience_sources``). The data path's ``Mixer`` appends each
source's sequences in turn, marked with the source's ``RowSource``.
"""

from __future__ import annotations

from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Tuple

from rlf import nest
from rlf.data_structures import Experience, RowSource
from rlf.utils.errors import UserError

__all__ = ["ExperienceSource", "Mixer", "mixed_count"]


def mixed_count(n: int, fraction: float) -> int:
    """Sequences from a second source that make ``fraction`` of a mini-batch with ``n``:
    ``round(n f / (1 - f))``."""
    return int(round(n * fraction / (1.0 - fraction)))


class ExperienceSource(NamedTuple):
    """A second source of sequences, appended to each training mini-batch.

    Attributes:
        name: the source, in messages (``"experience_replay"``).
        sample: ``sample(mini_batch, k)``: ``k`` batch-major ``[k, T]`` sequences as long as
            the mini-batch's ``[N, T]`` ``Experience`` (its layout, e.g. through
            ``rlf.data_structures.experience_like``), or None when the source cannot serve
            yet (then nothing is appended).
        fraction: the source's share of the mini-batch it is appended to, in ``[0, 1)``:
            ``k = mixed_count(rows so far, fraction)``.
        row_source: how its rows are marked (``Learner.row_sources``).
        observe: ``observe(step)``, called with each ``[B]`` ``Experience`` step (detached,
            on CPU) right after the data path stored it in its replay buffer: fills the
            source's memory (IMPALA's); None: the source fills itself otherwise. A memory
            that no mini-batch mixes (a model's training set) is a source of ``fraction`` 0.
        memory: ``memory(spec, num_environments)``: makes and returns the source's
            ``ReplayBuffer`` for steps of ``spec`` (the replay buffer's ``data_spec``) from
            ``num_environments`` environments. The data path calls it once, when it gets its
            replay buffer (before a checkpoint is restored), and holds the memory, so that
            checkpoints with ``TrainerConfig.save_replay_buffer`` carry it beside the replay
            buffer and a resumed run goes on with it. None: the source keeps its memory
            itself (in a ``NotCheckpointed``, or none).
    """

    name: str
    sample: Callable[[Experience, int], Optional[Experience]]
    fraction: float
    row_source: RowSource = RowSource.MIXED
    observe: Optional[Callable[[Experience], None]] = None
    memory: Optional[Callable[[Any, int], Any]] = None


def _project(part: Any, template: Any, source: str) -> Any:
    """``part`` with only the fields of ``template`` (a nest of the same kind, fewer fields).

    Raises:
        UserError: naming the field that ``part`` lacks.
    """
    leaves = []
    for path, _ in nest.flatten_with_path(template):
        try:
            leaves.append(nest.get_field(part, path))
        except KeyError as e:
            raise UserError(f"the sequences mixed from {source} have field '{path}' that the "
                            f"mini-batch has not; make them in its layout "
                            f"(rlf.data_structures.experience_like)") from e
    return nest.pack_sequence_as(template, leaves)


class Mixer:
    """Appends each source's ``mixed_count(rows so far, fraction)`` sequences to a mini-batch,
    in the order of ``sources``, on the mini-batch's device; the parts keep the fields they
    all have (offline files hold fewer than an unroll).

    Args:
        sources: the ``ExperienceSource`` s.
        hook: a deprecated ``mix_experience(experience, batch_info)`` override, called after
            them; None without.
    """

    def __init__(self, sources: Sequence[ExperienceSource],
                 hook: Optional[Callable[[Experience, Any], Tuple[Experience, Any]]] = None):
        for source in sources:
            if not 0.0 <= source.fraction < 1.0:
                raise UserError(f"experience source '{source.name}': fraction must be in "
                                f"[0, 1), got {source.fraction}")
        self.sources = tuple(sources)
        self.hook = hook

    def __call__(self, experience: Experience, batch_info: Any
                 ) -> Tuple[Experience, Any, Tuple[int, int, int]]:
        """``(experience, batch_info, counts)``: the mini-batch with the sources' sequences
        appended (``batch_info`` None once any were), and the rows of each ``RowSource``."""
        first = nest.flatten(experience)[0]
        n = first.shape[0]
        counts = [n, 0, 0]
        parts: List[Tuple[Experience, str]] = [(experience, "the data path")]
        rows = n
        for source in self.sources:
            k = mixed_count(rows, source.fraction)
            sampled = source.sample(experience, k) if k else None
            if sampled is None:
                continue
            # (a memory on the CPU, a mini-batch on the learner's device)
            sampled = nest.utils.convert_device(sampled, first.device)
            parts.append((sampled, f"'{source.name}'"))
            got = nest.flatten(sampled)[0].shape[0]  # (k, unless the source gave fewer)
            counts[source.row_source] += got
            rows += got
        if len(parts) > 1:
            leaves = [len(nest.flatten(p)) for p, _ in parts]
            template = parts[leaves.index(min(leaves))][0]
            experience = nest.utils.cat_nests([
                p if count == min(leaves) else _project(p, template, name)
                for (p, name), count in zip(parts, leaves)])
            batch_info = None
        if self.hook is not None:
            experience, batch_info = self.hook(experience, batch_info)
            counts[RowSource.MIXED] += nest.flatten(experience)[0].shape[0] - sum(counts)
        return experience, batch_info, (counts[0], counts[1], counts[2])
