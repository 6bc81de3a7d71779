"""The learners of a data-parallel run (``torch.distributed``) as the rest of rlf sees them: which
learner this process is, the collectives the learner and the training loop call, and random
draws that do not depend on how the batch is split among the learners.

A run with ``TrainerConfig.num_learners = N`` has ``N`` processes (ranks), each with ``1/N`` of
the environments: rank ``r`` runs the single learner's environments ``r*B ... (r+1)*B - 1``.
``set_world`` is called once per process by the launcher (``rlf.trainers.learners``); a
process that never calls it is the one learner of an ordinary run, where every function here
is what torch does by itself (the same draws, no communication). Below the process's entry a
``World`` is handed on as a value (``Trainer(world=...)``, ``build_training(world=...)``); it
owns its generators of batch draws, and ``World.batch_rows`` makes it the world the draws
within the block use (a context variable: each thread sees its own), so two runs of different
worlds can train in one process.

Random draws of a batch. A rollout step's ``[B]`` rows are rows ``r*B ... (r+1)*B - 1`` of the
``[N*B]`` batch one learner would act on; a sampled mini-batch's rows are rows ``S_r`` of the
one learner's ``[M]`` rows. Within ``batch_rows(S_r, M)``, ``randn_like``, ``rand_like`` and
``categorical_sample`` draw the whole ``[M, ...]`` batch from a generator every rank holds in
the same state (``World.generators``, forked from the one learner's after the build) and keep
the rows ``S_r``: each rank draws what the one learner would draw for those rows, so ``N``
learners with ``B`` environments each make the draws of one learner with ``N*B`` (the cost:
each rank draws ``N`` times its own noise). Outside ``batch_rows`` they draw from the
process's own generator, which each rank seeds differently.

Where the rows are. In ``rollout_step`` and ``train_step`` a draw's dim 0 holds the rows
(``[B, ...]``, or the batch-major ``[B*T, ...]`` of a temporally independent ``train_step``).
``calc_loss`` gets time-major ``[T, B, ...]`` data (``batch_rows(..., time_major=True)``): there
dim 1 holds the rows where it has the batch's size, and dim 0 where dim 0 is exactly the rows
(a batch-major ``[B, T, ...]`` transposed for the draw). ``batch_dim`` says it explicitly. A
shape whose rows cannot be found is refused (``UserError``) rather than drawn locally.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import warnings
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, cast

import torch

from rlf.utils.errors import UserError

__all__ = ["World", "world", "set_world", "fork_shared_generators", "shared_generator",
           "batch_rows", "rank_rows", "randn_like", "rand_like", "randint_like",
           "categorical_sample", "own_draws_check",
           "all_reduce_sum", "all_reduce_max", "all_gather_cat", "all_gather_cat_nest",
           "broadcast_object", "barrier"]


@dataclasses.dataclass
class World:
    """The learners of the run, as this process sees them.

    Attributes:
        rank: this learner's index, ``0 <= rank < size``; rank 0 writes the run's files.
        size: the number of learners ``N`` (1: an ordinary run, no process group).
        local_rank: the index among the learners of this machine (its CUDA device).
        generators: device type -> the generator of batch draws, in the same state on every
            rank (``fork_shared_generators``).
        comm_device: where the backend's collectives take tensors (``cpu`` for gloo, this
            learner's CUDA device for NCCL); tensors elsewhere are copied there and back.
    """

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    comm_device: str = "cpu"
    generators: Dict[str, torch.Generator] = dataclasses.field(default_factory=dict)

    @property
    def distributed(self) -> bool:
        """Whether there are several learners."""
        return self.size > 1

    @property
    def is_chief(self) -> bool:
        """Whether this is rank 0, which writes summaries, checkpoints and the config."""
        return self.rank == 0

    # ------------------------------------------------------------------ batch draws
    @contextlib.contextmanager
    def batch_rows(self, index: Optional[torch.Tensor], size: int,
                   time_major: bool = False) -> Iterator[None]:
        """Within the block, the batch in hand has rows ``index`` (``[n]`` int64, ascending)
        of a batch of ``size`` rows that one learner would hold, and batch draws
        (``randn_like``, ``rand_like``, ``randint_like``, ``categorical_sample``) draw that
        batch and keep those rows. A no-op for one learner or ``index`` None.

        A tensor of ``n * k`` leading rows is taken as ``n`` rows of ``k`` steps each (the
        batch-major ``[n*T]`` of a temporally independent ``train_step``). With
        ``time_major`` (``calc_loss``'s ``[T, B, ...]`` data), a tensor whose dim 1 has ``n``
        entries is taken as ``[T, n, ...]``, and one of exactly ``n`` leading rows as
        batch-major; a longer dim 0 (a flattened ``[T*n]``, whose order cannot be told) is
        refused.

        Args:
            index: ``[n]`` int64, the rows of the one learner's batch this learner holds.
            size: the one learner's batch size.
            time_major: whether the block's data is time-major ``[T, B, ...]``.
        """
        if index is None or not self.distributed:
            yield
            return
        token = _active_rows.set(_Rows(self, index, size, time_major))
        try:
            yield
        finally:
            _active_rows.reset(token)

    def rank_rows(self, batch_size: int) -> Optional[torch.Tensor]:
        """The rows ``rank*B ... (rank+1)*B - 1`` that this rank's ``B`` environments are
        among the one learner's ``N*B``; None for one learner. With
        ``batch_rows(rank_rows(B), N*B)``."""
        if not self.distributed:
            return None
        start = self.rank * batch_size
        return torch.arange(start, start + batch_size)

    @contextlib.contextmanager
    def own_draws_check(self, where: str) -> Iterator[None]:
        """With several learners, warns once per ``where`` when the block drew from this
        process's own generators (torch's default CPU generator, and the current CUDA device's
        where CUDA is in use): a plain ``torch.rand``, ``randn_like``, ``Distribution.sample()``
        or dropout in an algorithm's step, which each learner draws differently, so that the
        ``N`` learners no longer train as the one learner would. Batch draws (``rand_like``,
        ``randn_like``, ``randint_like``, ``categorical_sample`` here) use the shared generators
        and pass. Nothing for one learner.

        Args:
            where: what the block runs, for the warning (``"ImpalaAlgorithm.rollout_step"``).
        """
        if not self.distributed or where in _warned_own_draws:
            yield
            return
        cuda = torch.cuda.is_available() and torch.cuda.is_initialized()

        def states() -> List[torch.Tensor]:
            return [torch.get_rng_state()] + ([torch.cuda.get_rng_state()] if cuda else [])

        before = states()
        yield
        if not all(torch.equal(a, b) for a, b in zip(before, states())):
            _warned_own_draws.add(where)
            warnings.warn(f"{where} drew from torch's own generator (a plain torch.rand, "
                          f"randn_like, Distribution.sample() or dropout): with {self.size} "
                          f"learners each draws its own, so they no longer train as one "
                          f"learner would; draw with rlf.utils.distributed's rand_like, "
                          f"randn_like, randint_like or categorical_sample", RuntimeWarning,
                          stacklevel=4)

    def fork_shared_generators(self, devices: Sequence[torch.device]) -> None:
        """Gives this world generators of batch draws in the current state of the process's
        default generators (CPU, and each CUDA device type among ``devices``). Called on every
        rank at the same point (after the build, before the ranks reseed their own
        generators): the batch draws then continue the one learner's stream."""
        gens = {"cpu": torch.Generator().set_state(torch.get_rng_state())}
        for device in devices:
            device = torch.device(device)
            if device.type == "cuda" and "cuda" not in gens:
                g = torch.Generator(device=device)
                g.set_state(torch.cuda.get_rng_state(device))
                gens["cuda"] = g
        self.generators = gens

    def shared_generator(self, device: torch.device) -> torch.Generator:
        """This world's generator of batch draws on ``device``'s type.

        Raises:
            RuntimeError: if ``fork_shared_generators`` gave none for it.
        """
        kind = torch.device(device).type
        if kind not in self.generators:
            raise RuntimeError(f"no shared generator for device type {kind!r}: "
                               f"World.fork_shared_generators was not called with it")
        return self.generators[kind]

    # ------------------------------------------------------------------ collectives
    def all_reduce_sum(self, tensors: List[torch.Tensor]) -> None:
        """Sums each tensor over the ranks, in place (one message per dtype and device); nothing
        for one learner."""
        if not self.distributed or not tensors:
            return
        dist = _dist()
        groups: Dict[tuple, List[torch.Tensor]] = {}
        for t in tensors:
            groups.setdefault((t.dtype, t.device), []).append(t)
        for group in groups.values():
            flat = torch.cat([t.reshape(-1) for t in group]).to(self.comm_device)
            if flat.numel() <= SMALL_MESSAGE:
                # A small sum as a gather, added up in rank order on every rank (the same
                # result on all of them): one exchange where gloo's all-reduce takes two.
                parts = [torch.empty_like(flat) for _ in range(self.size)]
                dist.all_gather(parts, flat)
                flat = torch.stack(parts).sum(0)
            else:
                dist.all_reduce(flat)
            offset = 0
            for t in group:
                t.copy_(flat[offset:offset + t.numel()].view_as(t))
                offset += t.numel()

    def average_gradients(self, params: List[torch.Tensor]) -> None:
        """Replaces each parameter's gradient by its average over the ranks (one message), so
        that every rank clips and steps on the whole batch's gradient, as one learner would;
        a gradient missing on a rank counts as zeros there, one missing on every rank stays
        None. Nothing for one learner.

        Args:
            params: the parameters (any shape and float dtype), the same list in the same
                order on every rank; their ``.grad`` (the parameter's shape and dtype, or
                None) is replaced in place.

        Raises:
            RuntimeError: from ``torch.distributed`` if a rank is gone.
        """
        if not self.distributed or not params:
            return
        received = [p.grad is not None for p in params]
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        grads = [cast(torch.Tensor, p.grad) for p in params]
        flags = torch.tensor(received, dtype=grads[0].dtype, device=grads[0].device)
        self.all_reduce_sum(grads + [flags])
        for p, grad, ranks_with_grad in zip(params, grads, flags.tolist()):
            if ranks_with_grad:
                grad.div_(self.size)
            else:
                p.grad = None

    def all_reduce_max(self, value: float) -> float:
        """The largest ``value`` over the ranks (``value`` itself for one learner)."""
        if not self.distributed:
            return value
        t = torch.tensor([float(value)], dtype=torch.float64, device=self.comm_device)
        return float(self.all_gather_cat(t, 0).max())

    def all_gather_cat(self, tensor: torch.Tensor, dim: int) -> torch.Tensor:
        """The ranks' ``tensor``s (the same shape on every rank) concatenated along ``dim`` in rank
        order; ``tensor`` itself for one learner."""
        if not self.distributed:
            return tensor
        dist = _dist()
        local = tensor.detach().contiguous().to(self.comm_device)
        if local.dtype == torch.bool:  # (gloo gathers no bool)
            local = local.to(torch.uint8)
        parts = [torch.empty_like(local) for _ in range(self.size)]
        dist.all_gather(parts, local)
        return torch.cat(parts, dim).to(device=tensor.device, dtype=tensor.dtype)

    def all_gather_cat_nest(self, tensors: List[torch.Tensor], dim: int) -> List[torch.Tensor]:
        """``all_gather_cat`` of several CPU tensors in one message: each is carried as float64
        (exact for float32, and for integers and booleans below 2**53) and given back in its own
        dtype."""
        if not self.distributed or not tensors:
            return tensors
        flat = torch.cat([t.detach().reshape(-1).to(torch.float64) for t in tensors])
        gathered = self.all_gather_cat(flat, 0).view(self.size, -1)
        out, offset = [], 0
        for t in tensors:
            parts = gathered[:, offset:offset + t.numel()].reshape(self.size, *t.shape)
            out.append(torch.cat(list(parts), dim).to(t.dtype))
            offset += t.numel()
        return out

    def broadcast_object(self, obj):
        """Rank 0's ``obj`` on every rank (``obj`` itself for one learner)."""
        if not self.distributed:
            return obj
        box = [obj]
        _dist().broadcast_object_list(box, src=0)
        return box[0]

    def barrier(self) -> None:
        """Waits for every rank (nothing for one learner)."""
        if self.distributed:
            _dist().barrier()


#: Sums of at most this many elements go as one gather (``all_reduce_sum``).
SMALL_MESSAGE = 1 << 16

_world = World()
_warned_own_draws: set = set()


def world() -> World:
    """This process's ``World`` (one learner unless ``set_world`` said otherwise)."""
    return _world


def set_world(new: World) -> None:
    """Makes ``new`` this process's ``World`` (the launcher, once the process group is up; a
    test, ``World()`` to end it)."""
    global _world
    _world = new


def fork_shared_generators(devices: Sequence[torch.device]) -> None:
    """``World.fork_shared_generators`` of this process's world."""
    _world.fork_shared_generators(devices)


def shared_generator(device: torch.device) -> torch.Generator:
    """``World.shared_generator`` of this process's world.

    Raises:
        RuntimeError: if ``fork_shared_generators`` gave none for it.
    """
    return _world.shared_generator(device)


class _Rows:
    """The rows of a ``World.batch_rows`` block and the world whose generators draw them."""

    def __init__(self, world: World, index: torch.Tensor, size: int, time_major: bool = False):
        self.world, self.index, self.size, self.time_major = world, index, int(size), time_major


#: The rows of the innermost ``World.batch_rows`` block under way, or None.
_active_rows: contextvars.ContextVar[Optional[_Rows]] = contextvars.ContextVar(
    "rlf_batch_rows", default=None)


def _rows_of(x: torch.Tensor, batch_dim: Optional[int]) -> Optional[Tuple[_Rows, int, int]]:
    """``(rows, dim, steps)`` for a batch draw shaped like ``x``, the rows along ``dim`` (0:
    ``[n*steps, ...]``; 1: ``[steps, n, ...]``); None for a draw of the process's own.

    Raises:
        UserError: inside ``batch_rows`` for a shape whose rows cannot be placed.
    """
    rows = _active_rows.get()
    if rows is None or rows.index.numel() == 0:
        return None
    n, shape = rows.index.numel(), tuple(x.shape)
    if batch_dim is None:
        if rows.time_major and len(shape) >= 2 and shape[1] == n:
            batch_dim = 1
        elif shape and (shape[0] == n or (shape[0] % n == 0 and not rows.time_major)):
            batch_dim = 0
    if batch_dim == 1 and len(shape) >= 2 and shape[1] == n:
        return rows, 1, shape[0]
    if batch_dim == 0 and shape and shape[0] % n == 0:
        return rows, 0, shape[0] // n
    where = ("calc_loss's time-major [T, B, ...] data" if rows.time_major
             else "a rollout_step or train_step")
    found = "found in its shape" if batch_dim is None else f"along dim {batch_dim}"
    raise UserError(
        f"a batch draw (rlf.utils.distributed) of shape {list(shape)} in {where}: this "
        f"learner's {n} rows of the batch ({rows.size} for one learner) are not {found}, so "
        f"{rows.world.size} learners cannot draw as one would; draw on [B, ...] or time-major "
        f"[T, B, ...] tensors (batch_dim=0 or 1 says which), not flattened or scalar ones")


def _full_shape(rows: _Rows, dim: int, steps: int, x: torch.Tensor) -> Tuple[int, ...]:
    """The shape of the one learner's draw of which ``x``'s rows are taken."""
    if dim == 1:
        return (steps, rows.size) + tuple(x.shape[2:])
    return (rows.size * steps,) + tuple(x.shape[1:])


def _keep(full: torch.Tensor, rows: _Rows, dim: int, steps: int,
          like: torch.Tensor) -> torch.Tensor:
    index = rows.index.to(full.device)
    if dim == 1:
        return full[:, index].reshape(like.shape)
    full = full.view(rows.size, steps, *like.shape[1:])
    return full[index].reshape(like.shape)


def _batch_draw(draw, draw_like, x: torch.Tensor, batch_dim: Optional[int]) -> torch.Tensor:
    found = _rows_of(x, batch_dim)
    if found is None:
        return draw_like(x)
    rows, dim, steps = found
    full = draw(_full_shape(rows, dim, steps, x), dtype=x.dtype, device=x.device,
                generator=rows.world.shared_generator(x.device))
    return _keep(full, rows, dim, steps, x)


_DRAW_ARGS = """

    Args:
        x: the tensor whose shape, dtype and device the draw takes.
        batch_dim: the dim of ``x`` that holds the batch's rows (0: ``[B, ...]`` or
            batch-major ``[B*T, ...]``; 1: time-major ``[T, B, ...]``); None: found from
            the shape (``World.batch_rows``).

    Raises:
        UserError: within ``batch_rows`` of several learners, for a shape whose rows are not
            along ``batch_dim`` or cannot be found.
    """


def randn_like(x: torch.Tensor, batch_dim: Optional[int] = None) -> torch.Tensor:
    """``torch.randn_like(x)``; within ``batch_rows``, the rows of the whole batch's draw."""
    return _batch_draw(torch.randn, torch.randn_like, x, batch_dim)


def rand_like(x: torch.Tensor, batch_dim: Optional[int] = None) -> torch.Tensor:
    """``torch.rand_like(x)``; within ``batch_rows``, the rows of the whole batch's draw."""
    return _batch_draw(torch.rand, torch.rand_like, x, batch_dim)


def randint_like(x: torch.Tensor, high: int, batch_dim: Optional[int] = None) -> torch.Tensor:
    """``torch.randint_like(x, high)``; within ``batch_rows``, the rows of the whole batch's
    draw."""
    return _batch_draw(functools.partial(torch.randint, high),
                       lambda y: torch.randint_like(y, high), x, batch_dim)


for _draw in (randn_like, rand_like, randint_like):
    _draw.__doc__ = (_draw.__doc__ or "") + _DRAW_ARGS


def categorical_sample(probs: torch.Tensor) -> torch.Tensor:
    """One index per row of ``probs`` (``[L, K]``, rows summing to 1): ``torch.multinomial(probs,
    1)[:, 0]``; within ``batch_rows``, torch's own draw for the whole batch (``argmax(p / q)``
    with ``q ~ Exp(1)`` of the batch's shape, which is how ``torch.multinomial`` draws one
    sample) at these rows.

    Raises:
        UserError: within ``batch_rows`` of several learners, for ``L`` not a multiple of this
            learner's rows (``[B, K]`` or batch-major ``[B*T, K]`` are placed).
    """
    found = _rows_of(probs, 0)
    if found is None:
        return torch.multinomial(probs, 1)[:, 0]
    rows, dim, steps = found
    q = torch.empty(_full_shape(rows, dim, steps, probs), dtype=probs.dtype,
                    device=probs.device).exponential_(
        1, generator=rows.world.shared_generator(probs.device))
    return (probs / _keep(q, rows, dim, steps, probs)).argmax(-1)


# ---------------------------------------------------------------------- collectives
def _dist():
    import torch.distributed as dist
    return dist


def all_reduce_sum(tensors: List[torch.Tensor]) -> None:
    """``World.all_reduce_sum`` of this process's world."""
    return _world.all_reduce_sum(tensors)


def all_reduce_max(value: float) -> float:
    """``World.all_reduce_max`` of this process's world."""
    return _world.all_reduce_max(value)


def all_gather_cat(tensor: torch.Tensor, dim: int) -> torch.Tensor:
    """``World.all_gather_cat`` of this process's world."""
    return _world.all_gather_cat(tensor, dim)


def all_gather_cat_nest(tensors: List[torch.Tensor], dim: int) -> List[torch.Tensor]:
    """``World.all_gather_cat_nest`` of this process's world."""
    return _world.all_gather_cat_nest(tensors, dim)


def broadcast_object(obj):
    """``World.broadcast_object`` of this process's world."""
    return _world.broadcast_object(obj)


def barrier() -> None:
    """``World.barrier`` of this process's world."""
    return _world.barrier()


@contextlib.contextmanager
def batch_rows(index: Optional[torch.Tensor], size: int, time_major: bool = False
               ) -> Iterator[None]:
    """``World.batch_rows`` of this process's world."""
    with _world.batch_rows(index, size, time_major):
        yield


def rank_rows(batch_size: int) -> Optional[torch.Tensor]:
    """``World.rank_rows`` of this process's world."""
    return _world.rank_rows(batch_size)


@contextlib.contextmanager
def own_draws_check(where: str) -> Iterator[None]:
    """``World.own_draws_check`` of this process's world."""
    with _world.own_draws_check(where):
        yield
