"""Per-optimizer updates, loss shapes and masks: named loss terms train only their own
optimizer's parameters, an optimizer with ``every = N`` steps (and advances its schedule) on
every N-th update only, alternating terms still reach the summaries, and ``[T-k, B]``,
``[B]`` and scalar losses under a mask give hand-computed gradients; a sub-algorithm keeps
its own optimizers."""

import functools

import pytest
import torch
from torch import nn

from rlf.algorithms import Algorithm
from rlf.algorithms.optimization import masked_loss_mean
from rlf.data_structures import LossInfo, ReplacingMask
from rlf.utils import summary
from rlf.utils.tensorboard_reader import read_scalar_tags
from tests.algorithms._learners import learner_of

SGD = functools.partial(torch.optim.SGD, lr=1.0)


class TwoParts(Algorithm):
    """``a`` stepped every update, ``b`` every second one, ``b`` with a linear schedule."""

    def __init__(self, every_b=2, **kw):
        super().__init__(name="Two", **kw)
        self.a = nn.Parameter(torch.zeros(()))
        self.b = nn.Parameter(torch.zeros(()))
        self.add_optimizer(SGD, self.a, name="a")
        self.add_optimizer(SGD, self.b, name="b", every=every_b, lr_scheduler=functools.partial(
            torch.optim.lr_scheduler.LinearLR, start_factor=1.0, end_factor=0.5,
            total_iters=4))


def _terms(alg):
    # d a_term/da = 1 and d b_term/db = 1 + a: b's term also depends on a.
    return LossInfo(loss={"a": alg.a * 1.0, "b": alg.b * (1.0 + alg.a)})


def test_each_term_trains_only_its_optimizer_and_a_delayed_one_steps_every_second_update():
    alg = TwoParts()
    expected_b, lr_b = 0.0, 1.0
    for update in range(1, 5):
        assert alg.is_due("b") == (update % 2 == 0)
        a_before = alg.a.item()
        learner_of(alg).update_with_gradient(_terms(alg))
        # a: its own term's gradient (1) only, never b's (which would add b).
        assert alg.a.item() == pytest.approx(a_before - 1.0)
        if update % 2 == 0:  # b steps with the rate of its own step count
            expected_b -= lr_b * (1.0 + a_before)
            lr_b -= 0.125  # LinearLR: 1.0 -> 0.5 over 4 of b's steps
        assert alg.b.item() == pytest.approx(expected_b)
    assert alg.num_updates == 4
    assert learner_of(alg).optimizer_steps == {"a": 4, "b": 2}
    # The schedule of b advanced on b's two steps only, not on the a-only updates.
    assert learner_of(alg).schedules[1].last_epoch == 2
    assert learner_of(alg).optimizers[1].param_groups[0]["lr"] == pytest.approx(0.75)


def test_a_missing_term_leaves_its_optimizer_unstepped_and_an_unknown_one_is_refused():
    alg = TwoParts(every_b=1)
    learner_of(alg).update_with_gradient(LossInfo(loss={"a": alg.a * 2.0}))
    assert learner_of(alg).optimizer_steps == {"a": 1, "b": 0}
    assert learner_of(alg).schedules[1].last_epoch == 0
    with pytest.raises(ValueError, match=r"loss terms \['c'\] name no optimizer.*\['a', 'b'\]"):
        learner_of(alg).update_with_gradient(LossInfo(loss={"c": alg.a * 1.0}))
    with pytest.raises(KeyError, match="no optimizer named 'c'"):
        alg.is_due("c")


def test_a_single_loss_steps_every_due_optimizer_and_names_must_differ():
    alg = TwoParts()
    learner_of(alg).update_with_gradient(LossInfo(loss=alg.a + alg.b))
    assert learner_of(alg).optimizer_steps == {"a": 1, "b": 0}
    assert alg.b.item() == 0.0  # not due: its gradient was computed but not applied
    learner_of(alg).update_with_gradient(LossInfo(loss=alg.a + alg.b))
    assert learner_of(alg).optimizer_steps == {"a": 2, "b": 1}
    fresh = TwoParts()
    with pytest.raises(ValueError, match="name 'a' is taken"):
        fresh.add_optimizer(SGD, fresh.b, name="a")
    with pytest.raises(ValueError, match="every must be an int >= 1"):
        Algorithm().add_optimizer(SGD, nn.Linear(1, 1), every=0)


def test_step_counts_are_checkpointed():
    alg = TwoParts()
    for _ in range(3):
        learner_of(alg).update_with_gradient(_terms(alg))
    other = TwoParts()
    other.load_state_dict(alg.state_dict())
    assert other.num_updates == 3 and learner_of(other).optimizer_steps == {"a": 3, "b": 1}
    assert other.is_due("b")


def test_an_alternating_term_reaches_the_summaries(tmp_path):
    # Summaries every 2 updates; b's term exists only on odd updates (every_b=1, and the
    # loss leaves b out on even ones), so a summary step never sees it. It is summarised
    # from the last update that produced it.
    alg = TwoParts(every_b=1)
    writer = summary.create_summary_writer(str(tmp_path))
    summary.set_default_writer(writer)
    summary.set_summary_interval(2)
    try:
        for update in range(1, 7):
            summary.set_global_counter(update)
            loss = {"a": alg.a * 1.0}
            if update % 2:
                loss["b"] = alg.b * 3.0
            learner_of(alg).update_with_gradient(
                LossInfo(loss=loss, extra={"term": alg.a * 0 + update}))
        writer.flush()
    finally:
        summary.set_default_writer(None)
        summary.set_summary_interval(1)
        writer.close()
    tags = ["loss/Two/b", "global_grad_norm/Two/b", "learning_rate/Two/b", "loss/Two/a",
            "loss/Two/term"]
    series = read_scalar_tags(tmp_path, tags)
    assert series["loss/Two/b"][0] == [2, 4, 6]
    # b = 0, then -3 (rate 1), then -3 - 3 * 0.875 (b's schedule after one step)
    assert series["loss/Two/b"][1] == pytest.approx([3 * b for b in (0.0, -3.0, -5.625)])
    assert series["global_grad_norm/Two/b"][1] == pytest.approx([3.0, 3.0, 3.0])
    assert series["learning_rate/Two/b"][0] == [2, 4, 6]
    assert series["loss/Two/term"][1] == pytest.approx([2.0, 4.0, 6.0])


def test_a_t_minus_3_loss_with_a_mask_gives_the_hand_computed_gradient():
    alg = TwoParts(every_b=1)
    # T = 6, B = 2: a loss over the last T-3 = 3 steps (after a burn-in of 3), [3, 2].
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    mask = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    step_mask = torch.ones(6, 2)  # the loop's mask (all ones) times the loss's own
    learner_of(alg).update_with_gradient(LossInfo(loss={"a": alg.a * x}, mask={"a": mask}),
                                         step_mask)
    # "all": d/da sum(mask * a x) / 6 = (1 + 3 + 4 + 6) / 6
    assert alg.a.item() == pytest.approx(-14 / 6)
    valid = TwoParts(every_b=1, loss_average="valid")
    learner_of(valid).update_with_gradient(LossInfo(loss={"a": valid.a * x}, mask={"a": mask}),
                                       step_mask)
    assert valid.a.item() == pytest.approx(-14 / 4)  # over the 4 kept entries
    with pytest.raises(ValueError, match=r"mask of shape \(2, 2\) does not fit a loss of "
                                         r"shape \(3, 2\)"):
        learner_of(alg).update_with_gradient(LossInfo(loss={"a": alg.a * x}, mask={"a": mask[:2]}))


def test_unmasked_shapes_take_the_loop_mask_rows_or_none():
    step_mask = torch.tensor([[1., 1.], [0., 1.], [1., 1.], [0., 0.]])  # [T=4, B=2]
    for loss_shape, expected in (((2, 2), 3 / 4),  # [T-2, B]: rows 0-1, 3 kept of 4
                                 ((2,), 1.0),  # [B]: one per sequence, each has a valid step
                                 ((), 1.0)):  # a scalar
        alg = TwoParts(every_b=1)
        learner_of(alg).update_with_gradient(LossInfo(loss=alg.a * torch.ones(loss_shape)),
                                             step_mask)
        assert alg.a.item() == pytest.approx(-expected), loss_shape


def test_a_transition_loss_flattened_to_b_on_two_step_sequences_is_masked():
    # mini_batch_length = 2: each sequence is one transition, and a transition loss
    # flattened from [T-1, B] = [1, B] to [B] looks like one loss per sequence. Sequence 1
    # is [LAST, FIRST] (no transition): its loss of 100 must not count.
    from rlf.data_structures import StepType, valid_step_mask
    first, mid, last = int(StepType.FIRST), int(StepType.MID), int(StepType.LAST)
    step_type = torch.tensor([[mid, last, first, mid], [mid, first, mid, last]])  # [T=2, B=4]
    valid = valid_step_mask(step_type)
    per_transition = torch.tensor([1.0, 100.0, 1.0, 1.0])
    for loss in (per_transition.view(1, 4), per_transition):  # [T-1, B] and flattened [B]
        alg = TwoParts(every_b=1)
        learner_of(alg).update_with_gradient(LossInfo(loss=alg.a * loss), valid)
        assert alg.a.item() == pytest.approx(-3 / 4), tuple(loss.shape)  # ALF's mean over all


def test_masked_loss_mean_against_a_float64_transcription():
    torch.manual_seed(0)
    loss = torch.randn(5, 3, 2, dtype=torch.float64)
    mask = (torch.rand(5, 3) > 0.4).double()
    m = mask[:, :, None].expand(5, 3, 2)
    assert float(masked_loss_mean(loss, mask)) == pytest.approx(float((loss * m).sum() / 30))
    assert float(masked_loss_mean(loss, mask, "valid")) == pytest.approx(
        float((loss * m).sum() / m.sum()))
    assert float(masked_loss_mean(loss, torch.zeros(5, 3), "valid")) == 0.0
    with pytest.raises(ValueError, match="loss_average must be one of"):
        masked_loss_mean(loss, mask, "mean")


def test_a_mask_that_keeps_nothing_at_the_first_update_is_warned_about_once(caplog):
    # Sampled sequences of one step: the default step mask ([1, B] of 0: every step is its
    # sequence's last) empties a per-step loss, which then trains nothing.
    alg = TwoParts(every_b=1)
    one_step = torch.zeros(1, 3)

    def per_step():
        return LossInfo(loss={"a": alg.a * torch.ones(1, 3), "b": alg.b * torch.ones(3)})

    with caplog.at_level("WARNING", logger="rlf.algorithms.optimization"):
        learner_of(alg).update_with_gradient(per_step(), one_step)
        learner_of(alg).update_with_gradient(per_step(), one_step)
    warned = [r.getMessage() for r in caplog.records]
    # b's [B] loss is one per sequence, and no one-step sequence holds a valid step either
    assert len(warned) == 2 and "loss term 'a'" in warned[0] and "'b'" in warned[1], warned
    assert "mini_batch_length = 1" in warned[0] and "ReplacingMask" in warned[0]
    assert alg.a.item() == 0.0 and alg.b.item() == 0.0  # neither learned
    caplog.clear()
    own = TwoParts(every_b=1)  # a mask that replaces the step mask keeps the steps
    with caplog.at_level("WARNING", logger="rlf.algorithms.optimization"):
        learner_of(own).update_with_gradient(LossInfo(loss={"a": own.a * torch.ones(1, 3)},
                                          mask={"a": ReplacingMask(torch.ones(1, 3))}),
                                         one_step)
    assert not caplog.records and own.a.item() == -1.0


def test_a_loss_mask_multiplies_the_step_mask_and_a_replacing_one_replaces_it():
    # [T=3, B=2] steps; the step mask leaves out step 1 of sequence 0 (say a LAST) and each
    # sequence's last step. The loss's own mask keeps sequence 0 only (a row selection).
    step_mask = torch.tensor([[1.0, 1.0], [0.0, 1.0], [0.0, 0.0]])
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    rows = torch.tensor([[1.0, 0.0]]).expand(3, 2)
    for mask, kept in ((rows, 1.0),  # both: step 0 of sequence 0
                       (ReplacingMask(rows), 1.0 + 3.0 + 5.0),  # the own mask alone
                       (torch.tensor([[2.0, 1.0]]).expand(3, 2), 2 * 1.0 + 2.0 + 4.0)):
        alg = TwoParts(every_b=1)
        learner_of(alg).update_with_gradient(LossInfo(loss=alg.a * x, mask=mask), step_mask)
        # ALF's "all": d/da sum(mask * a x) / 6
        assert alg.a.item() == pytest.approx(-kept / 6), mask
    # a [T-1, B] loss: the own mask times the step mask's first T - 1 rows
    alg = TwoParts(every_b=1)
    learner_of(alg).update_with_gradient(LossInfo(loss=alg.a * x[:2], mask=rows[:2]), step_mask)
    assert alg.a.item() == pytest.approx(-1.0 / 4)


class Sub(Algorithm):
    """A sub-algorithm with its own optimizer (SGD at rate 0.5) and a named one."""

    def __init__(self):
        super().__init__(optimizer=functools.partial(torch.optim.SGD, lr=0.5), name="sub")
        self.u = nn.Parameter(torch.zeros(()))
        self.v = nn.Parameter(torch.zeros(()))
        self.add_optimizer(SGD, self.v, name="v", every=2)


class Parent(Algorithm):
    """Its own optimizer covers ``w`` and the ``plain`` sub-module; ``sub`` keeps its own."""

    def __init__(self):
        super().__init__(optimizer=SGD, name="parent")
        self.w = nn.Parameter(torch.zeros(()))
        self.plain = nn.Linear(1, 1, bias=False)
        nn.init.zeros_(self.plain.weight)
        self.sub = Sub()

    def loss(self):
        return LossInfo(loss=self.w + 2.0 * self.plain.weight.sum() + 3.0 * self.sub.u
                        + 4.0 * self.sub.v)


def test_a_sub_algorithm_keeps_its_own_optimizers_and_counts_in_the_parents_checkpoint():
    alg = Parent()
    assert learner_of(alg).names == ["default", "sub/v", "sub/default"]
    owned = [{id(p) for g in o.param_groups for p in g["params"]}
             for o in learner_of(alg).optimizers]
    assert owned == [{id(alg.w), id(alg.plain.weight)}, {id(alg.sub.v)}, {id(alg.sub.u)}]
    for _ in range(2):
        learner_of(alg).update_with_gradient(alg.loss())
    # one loss, each parameter moved by its own optimizer's rate x its gradient per step
    assert alg.w.item() == pytest.approx(-2.0)
    assert alg.plain.weight.item() == pytest.approx(-4.0)
    assert alg.sub.u.item() == pytest.approx(-0.5 * 3.0 * 2)
    assert alg.sub.v.item() == pytest.approx(-4.0)  # stepped on update 2 only
    assert learner_of(alg).optimizer_steps == {"default": 2, "sub/v": 1, "sub/default": 2}
    other = Parent()
    other.load_state_dict(alg.state_dict())
    assert learner_of(other).optimizer_steps == learner_of(alg).optimizer_steps
    assert other.sub.u.item() == -3.0


def test_a_term_and_an_extra_that_would_write_one_tag_are_refused_before_any_change():
    # Both would write loss/Two/a: the extra would silently replace the term in TensorBoard.
    alg = TwoParts(every_b=1)
    with pytest.raises(ValueError, match=r"loss term 'a' \(LossInfo.loss\) and the extra 'a' "
                                         r"\(LossInfo.extra\).*'loss/Two/a'; rename the extra"):
        learner_of(alg).update_with_gradient(LossInfo(loss={"a": alg.a * 7.0, "b": alg.b * 1.0},
                                          extra={"a": alg.a * 0 + 0.5}))
    assert alg.num_updates == 0 and alg.a.item() == 0.0
    learner_of(alg).update_with_gradient(LossInfo(loss={"a": alg.a * 7.0},
                                                  extra={"a_loss": alg.a * 0}))
    assert alg.num_updates == 1
