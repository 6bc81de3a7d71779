"""The training loops of an ``Algorithm``: on one on-policy unroll, and from the replay buffer
(sampled or whole, with offline and hybrid data), with their summaries."""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Tuple

import torch
from torch import nn

from rlf import nest
from rlf.data_structures import Experience, LossInfo, valid_step_mask
from rlf.utils import summary
from rlf.utils.common import detach, is_empty, reset_state_if_necessary

__all__ = ["TrainingLoopsMixin"]

logger = logging.getLogger(__name__)


def _importance_weighted(name: str, loss: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``loss`` (``[T-k, B, ...]`` or ``[B]``) times prioritised replay's ``[B]`` importance
    weights.

    Raises:
        ValueError: for a loss without the batch dim (a scalar), which cannot be weighted.
    """
    if loss.ndim == 1 and loss.shape[0] == weights.shape[0]:
        return loss * weights
    if loss.ndim < 2 or loss.shape[1] != weights.shape[0]:
        raise ValueError(f"{name}: prioritised replay weights each sequence of the batch, so "
                         f"its loss must be [T-k, B, ...] or [B]; got shape "
                         f"{tuple(loss.shape)} for B = {weights.shape[0]}")
    return loss * weights.view((1, -1) + (1,) * (loss.ndim - 2))


class TrainingLoopsMixin:
    """``Algorithm``'s training loops (ALF's ``train_from_unroll`` and
    ``train_from_replay_buffer``)."""

    # ------------------------------------------------------------------ training loops
    @property
    def trains_on_rollout_graph(self) -> bool:
        """Whether on-policy training uses the rollout's own forward pass (one update per
        unroll, no ``train_step``): on-policy with ``num_updates_per_train_iter = 1`` and
        neither ``mini_batch_size`` nor ``mini_batch_length`` set. Otherwise an on-policy
        algorithm unrolls without gradients and trains in epochs (``train_from_unroll``)."""
        config = self._config
        return bool(self.on_policy) and (
            config is None or (config.num_updates_per_train_iter == 1
                               and config.mini_batch_size is None
                               and config.mini_batch_length is None))

    def train_from_unroll(self, experience: Experience, train_info: Any) -> int:
        """Trains on one on-policy unroll.

        With ``trains_on_rollout_graph``: one update whose loss is ``calc_loss`` of the
        rollout's own ``[T, B]`` infos. Otherwise (PPO's epochs): the unroll, preceded by the
        previous unroll's last step (whose transition into this unroll's first step would
        else never be trained on, as in ALF's ``unroll_length + 1`` ring), goes through
        ``preprocess_experience`` once as a whole and is then trained on for
        ``num_updates_per_train_iter`` epochs of shuffled mini-batches (``train_epochs``).
        That step is checkpointed (``get_extra_state``), so a resumed run trains on the
        transition across the checkpoint too; where the environments restart at a resume,
        the step precedes a FIRST and ``valid_step_mask`` removes it as a cut. A first unroll
        of one step (``unroll_length = 1``) holds no transition and trains nothing.

        Args:
            experience: ``[T, B]`` ``Experience`` (``rollout_info`` removed).
            train_info: the unroll's ``[T, B]`` ``rollout_info`` (with the graph of
                ``rollout_step`` if ``trains_on_rollout_graph``).

        Returns:
            The number of steps trained on (with repetitions).
        """
        if not self.trains_on_rollout_graph:
            experience = detach(experience._replace(rollout_info=train_info))
            # A copy: a view would keep (and checkpoint) the whole unroll's storage.
            last = nest.map_structure(lambda x: x[-1:].clone(), experience)
            previous = self._carried_unroll_step(last)
            self.__dict__["_carried_step_flat"] = nest.flatten(last)
            if previous is not None:
                experience = nest.utils.cat_nests([previous, experience])
            elif experience.time_step.step_type.shape[0] < 2:
                return 0  # one step, no transition yet: it is carried into the next unroll
            return self.train_epochs(
                nest.map_structure(lambda x: x.transpose(0, 1), experience), None,
                self._config.num_updates_per_train_iter, shuffle=True)
        valid_masks = valid_step_mask(experience.time_step.step_type)
        with self._autocast():
            loss_info = self.calc_loss(train_info)
        loss_info, params = self.update_with_gradient(loss_info, valid_masks)
        self.after_update(experience.time_step, train_info)
        self.summarize_train(experience, train_info, loss_info, params)
        return int(valid_masks.numel())

    def _carried_unroll_step(self, template: Experience):
        """The previous unroll's last step, kept flat as checkpoints hold it, rebuilt like
        ``template`` (a ``[1, B]`` step of the new unroll); None if there is none or it does
        not fit (a checkpoint of another configuration: the first unroll then trains without
        it, with a warning)."""
        flat = self.__dict__.get("_carried_step_flat")
        if flat is None:
            return None
        leaves = nest.flatten(template)
        if len(flat) != len(leaves) or any(
                a.shape != b.shape or a.dtype != b.dtype for a, b in zip(flat, leaves)):
            logger.warning("%s: the checkpoint's carried unroll step does not fit this "
                           "algorithm's experience; the first unroll trains without it",
                           self._name)
            return None
        return nest.pack_sequence_as(template, [a.to(b.device) for a, b in zip(flat, leaves)])

    def get_extra_state(self) -> Dict[str, Any]:
        """The parent's extra state plus the carried last step of the previous unroll
        (on-policy epochs; ``train_from_unroll``), as a flat list of ``[1, B, ...]`` tensors
        (``torch.load(weights_only=True)`` accepts lists, not namedtuples) or None."""
        state = super().get_extra_state()
        state["last_unroll_step"] = self.__dict__.get("_carried_step_flat")
        return state

    def set_extra_state(self, state: Dict[str, Any]) -> None:
        """Restores ``get_extra_state()`` output (checkpoints without the carried step leave
        none)."""
        super().set_extra_state(state)
        self.__dict__["_carried_step_flat"] = state.get("last_unroll_step")

    def train_from_replay_buffer(self, update_global_counter: bool = False) -> int:
        """Trains on experience from the replay buffer (ALF's semantics).

        With ``whole_replay_buffer_training`` every held step is used
        ``num_updates_per_train_iter`` times (``train_epochs`` over the whole buffer);
        otherwise ``mini_batch_size * num_updates_per_train_iter`` sequences of
        ``mini_batch_length`` steps are sampled and each is used once, in order.
        ``preprocess_experience`` sees the whole buffer (or the whole sampled batch) once,
        before it is split.

        Args:
            update_global_counter: advance the global counter per mini-batch if
                ``config.update_counter_every_mini_batch``.

        Returns:
            The number of steps trained on (with repetitions); 0 if the buffer holds fewer
            than ``config.initial_collect_steps`` steps or, for sampling, no environment holds
            a whole sequence of ``mini_batch_length`` steps yet.

        Raises:
            ValueError: if sampling is needed and ``mini_batch_size`` or
                ``mini_batch_length`` is not set.
        """
        config = self._config
        buffer, offline = self.replay_buffer, self.offline_replay_buffer
        online_ready = buffer is not None and buffer.total_size >= max(
            config.initial_collect_steps, 1)
        if online_ready and not config.whole_replay_buffer_training and (
                config.mini_batch_length is not None):
            # A small initial_collect_steps: nothing to sample until a whole sequence is held.
            online_ready = buffer.can_sample(config.mini_batch_length)
        if not online_ready and offline is None:
            return 0
        need_sampling = not online_ready or not config.whole_replay_buffer_training
        if need_sampling and (config.mini_batch_size is None
                              or config.mini_batch_length is None):
            raise ValueError("TrainerConfig.mini_batch_size and mini_batch_length must be set "
                             "for training from sampled (or offline) batches")
        if not online_ready:  # offline only: no environment data (yet)
            experience, _ = offline.get_batch(
                config.mini_batch_size * config.num_updates_per_train_iter,
                config.mini_batch_length)
            steps = self.train_epochs(experience, None, 1, shuffle=False,
                                      update_global_counter=update_global_counter)
        elif config.whole_replay_buffer_training:
            experience = buffer.gather_all(ignore_earliest_frames=True)  # [E, L]
            steps = self.train_epochs(experience, None, config.num_updates_per_train_iter,
                                      shuffle=True, mix_offline=offline is not None,
                                      update_global_counter=update_global_counter)
        else:
            experience, batch_info = buffer.get_batch(
                config.mini_batch_size * config.num_updates_per_train_iter,
                config.mini_batch_length)
            steps = self.train_epochs(experience, batch_info, 1, shuffle=False,
                                      mix_offline=offline is not None,
                                      update_global_counter=update_global_counter)
        if config.clear_replay_buffer and not config.whole_replay_buffer_training:
            buffer.clear()
        return steps

    def train_epochs(self, experience: Experience, batch_info: Any, num_epochs: int,
                     shuffle: bool, mix_offline: bool = False,
                     update_global_counter: bool = False) -> int:
        """Trains on a batch-major ``[N, L]`` experience in epochs of mini-batches.

        1. The loss mask (``valid_step_mask``) is computed on the whole experience and
           ``preprocess_experience`` is called once on all of it (GAE, returns, ...).
        2. If ``config.mini_batch_length`` is set and shorter than ``L``, each row is cut into
           ``L // mini_batch_length`` sequences (the oldest ``L % mini_batch_length`` steps,
           which fill none, are dropped); ``mini_batch_length = 1`` gives single steps, so
           mini-batches are transitions drawn across time and environments. Sequences with
           no valid step (e.g. each row's final step, which has no successor) are dropped:
           they would add nothing to a loss but would make an extra, nearly empty
           mini-batch (and an extra optimizer and learning-rate-schedule step) per epoch.
        3. The sequences are moved to the algorithm's device at once (device memory for the
           whole batch, one copy per call), then each of the ``num_epochs`` epochs goes
           through them in mini-batches of ``config.mini_batch_size`` (all if None), in a
           new random order if ``shuffle`` (drawn on the CPU generator whatever the device).
        4. Training summaries (losses, gradient norms, learning rates, ...) are written for
           the last mini-batch of a summary iteration only, as in ALF, or, with the counter
           advanced per mini-batch, for each mini-batch whose counter is due.

        Args:
            experience: batch-major ``[N, L]`` ``Experience`` (CPU or the algorithm's
                device).
            batch_info: the replay buffer's ``BatchInfo`` of the ``N`` rows (priorities), or
                None; only without a cut (``mini_batch_length`` None or ``L``).
            num_epochs: passes over the data.
            shuffle: draw each epoch's mini-batches in a random order.
            mix_offline: append offline sequences to each mini-batch (hybrid training).
            update_global_counter: see ``train_from_replay_buffer``.

        Returns:
            The number of steps trained on (with repetitions); 0 if
            ``mini_batch_length > L``.
        """
        config = self._config
        length = nest.flatten(experience)[0].shape[1]
        valid = valid_step_mask(experience.time_step.step_type.transpose(0, 1)).transpose(0, 1)
        time_step, rollout_info = self.preprocess_experience(
            experience.time_step, experience.rollout_info, batch_info)
        experience = experience._replace(time_step=time_step, rollout_info=rollout_info)
        seq = config.mini_batch_length or length
        if seq > length:
            return 0
        if seq < length:
            usable = length - length % seq

            def _split(x):
                x = x[:, length - usable:]
                return x.reshape(x.shape[0] * (usable // seq), seq, *x.shape[2:])

            experience, valid = nest.map_structure(_split, (experience, valid))
            batch_info = None
            keep = valid.any(1)
            if not bool(keep.all()):
                experience, valid = nest.map_structure(lambda x: x[keep], (experience, valid))
        # One host-to-device copy of the whole batch: each mini-batch is then gathered on the
        # device, not gathered on the CPU and copied from pageable memory update by update.
        experience, valid = nest.utils.convert_device((experience, valid), self._device)
        batch_size = valid.shape[0]
        mini_batch_size = config.mini_batch_size or batch_size
        counter_per_mini_batch = update_global_counter and config.update_counter_every_mini_batch
        record = summary.should_record_summaries()
        steps = 0
        for epoch in range(num_epochs):
            order = (torch.randperm(batch_size) if shuffle and mini_batch_size < batch_size
                     else None)
            for b in range(0, batch_size, mini_batch_size):
                # In order, a slice (a view): the buffer's batch is already a copy, and
                # indexing would copy it again (~16 ms for a whole [16, 20] Pong batch).
                idx = (slice(b, b + mini_batch_size) if order is None
                       else order[b:b + mini_batch_size])
                mb, mb_valid = nest.map_structure(lambda x: x[idx], (experience, valid))
                mb_info = (None if batch_info is None
                           else nest.map_structure(lambda x: x[idx], batch_info))
                n = mb_valid.shape[0]
                if mix_offline:
                    mb, mb_info = self._mix_offline(mb, self.offline_replay_buffer)
                mb, mb_info = self.mix_experience(mb, mb_info)
                added = nest.flatten(mb)[0].shape[0] - n
                if added:  # appended whole sequences: their own mask
                    extra = mb.time_step.step_type[n:].transpose(0, 1)
                    mb_valid = torch.cat([mb_valid,
                                          valid_step_mask(extra).transpose(0, 1)])
                if counter_per_mini_batch:
                    summary.increment_global_counter()
                    record = summary.should_record_summaries()
                last = epoch == num_epochs - 1 and b + mini_batch_size >= batch_size
                size = min(b + mini_batch_size, batch_size) - b
                with summary.record_if(lambda: record and (last or counter_per_mini_batch)):
                    steps += self._update(mb, mb_info, mb_valid,
                                          weight=size / mini_batch_size)
        return steps

    def _update(self, experience: Experience, batch_info, valid: torch.Tensor,
                weight: float) -> int:
        """One gradient update on a batch-major ``[B, T]`` mini-batch and its ``[B, T]`` loss
        mask, both on the algorithm's device (``train_epochs`` moved them)."""
        experience, valid = nest.map_structure(lambda x: x.transpose(0, 1), (experience, valid))
        with self._autocast():
            train_info = self._collect_train_info(experience)
            loss_info = self.calc_loss(train_info)
        k = self._config.burn_in_steps
        if k:  # calc_loss saw the [T-k, B] steps after the burn-in: so does the mask
            valid = valid[k:]
            experience = nest.map_structure(lambda x: x[k:], experience)
        if batch_info is not None and self._config.priority_replay:
            weights = batch_info.importance_weights.to(self._device)
            loss_info = loss_info._replace(loss=nest.map_structure(
                lambda x: _importance_weighted(self._name, x, weights), loss_info.loss))
        loss_info, params = self.update_with_gradient(loss_info, valid, weight)
        self.after_update(experience.time_step, train_info)
        if (batch_info is not None and self._config.priority_replay
                and not is_empty(loss_info.priority)):
            self.replay_buffer.update_priority(batch_info.env_ids, batch_info.positions,
                                               loss_info.priority.detach().cpu())
        self.summarize_train(experience, train_info, loss_info, params)
        return int(valid.numel())

    def _collect_train_info(self, experience: Experience) -> Any:
        """``train_step`` over ``[T, B]`` experience; returns the ``[T, B]`` infos, or the
        ``[T-k, B]`` infos after a burn-in of ``k = config.burn_in_steps`` steps.

        With a recurrent ``train_state_spec`` the steps run one by one from the stored
        rollout state of the first step (``config.use_rollout_state``, mapped by
        ``train_state_from_rollout_state``) or zeros, the state
        reset wherever a step is FIRST. The burn-in steps run without gradient and their
        infos are dropped; the state they leave is carried on, detached."""
        time_step, rollout_info = experience.time_step, experience.rollout_info
        t_len, batch = time_step.step_type.shape[:2]
        independent = self._config.temporally_independent_train_step
        if independent is None:
            independent = not nest.flatten(self._train_state_spec)
        if independent:
            # Flattened batch-major: replayed experience is a [T, B] view of [B, T] storage,
            # so this reshape is a view where a time-major one copies every field (the
            # frames: ~1.5 ms per 336 Pong observations).
            flat = nest.map_structure(
                lambda x: x.transpose(0, 1).reshape(batch * t_len, *x.shape[2:]),
                (time_step, rollout_info))
            step = self.train_step(flat[0], (), flat[1])
            return nest.map_structure(
                lambda x: x.reshape(batch, t_len, *x.shape[1:]).transpose(0, 1), step.info)
        if self._config.use_rollout_state:
            state = self.train_state_from_rollout_state(
                nest.map_structure(lambda x: x[0], experience.state))
        else:
            state = self.get_initial_train_state(batch)
        initial_state = self.get_initial_train_state(batch)
        burn_in = self._config.burn_in_steps
        infos = []
        for t in range(t_len):
            inputs = nest.map_structure(lambda x: x[t], time_step)
            state = reset_state_if_necessary(state, initial_state, inputs.is_first())
            info_t = nest.map_structure(lambda x: x[t], rollout_info)
            if t < burn_in:
                with torch.no_grad():
                    state = detach(self.train_step(inputs, state, info_t).state)
                continue
            step = self.train_step(inputs, state, info_t)
            infos.append(step.info)
            state = step.state
        return nest.utils.stack_nests(infos)

    def _mix_offline(self, experience: Experience, offline) -> Tuple[Experience, Any]:
        """Hybrid training: appends ``round(N f / (1 - f))`` offline sequences (``f`` =
        ``config.offline_fraction``) to a mini-batch of ``N`` online ones, keeping the fields
        both have (the offline data spec's)."""
        n, length = nest.flatten(experience)[0].shape[:2]
        f = self._config.offline_fraction
        k = int(round(n * f / (1.0 - f)))
        if k == 0:
            return experience, None
        offline_batch, _ = offline.get_batch(k, length)
        online = nest.pack_sequence_as(offline.data_spec, [
            nest.get_field(experience, p) for p, _ in nest.flatten_with_path(offline.data_spec)])
        return nest.utils.cat_nests([online, offline_batch]), None

    @property
    def offline_replay_buffer(self):
        """The buffer of offline data (``load_offline_replay_buffer``), or None."""
        return self.__dict__.get("_offline_replay_buffer")

    @property
    def replay_buffer(self):
        """The replay buffer, or None (on-policy algorithms, or before the first unroll)."""
        return self.__dict__.get("_replay_buffer")

    # ------------------------------------------------------------------ summaries
    def summarize_train(self, experience: Experience, train_info: Any, loss_info: LossInfo,
                        params: List[nn.Parameter]) -> None:
        """Summaries after an update: parameter and gradient histograms and norms when
        ``config.summarize_grads_and_vars``. Loss terms, gradient norms and learning rates
        are written by ``update_with_gradient``."""
        if (self._config is None or not self._config.summarize_grads_and_vars
                or not summary.should_record_summaries()):
            return
        for name, p in self.named_parameters():
            summary.histogram(f"summarize_vars/{name}/value", p)
            summary.scalar(f"summarize_vars/{name}/norm", p.detach().norm())
            if p.grad is not None:
                summary.histogram(f"summarize_grads/{name}/value", p.grad)
                summary.scalar(f"summarize_grads/{name}/norm", p.grad.norm())
