"""Learning-rate schedules that step every optimizer step, planned from the run's length.

Each ``configs/scheduler/*.yaml`` names one of these. The model builds it with the run's
real number of optimizer steps (``Trainer.estimated_stepping_batches``: epochs or
``max_steps``, gradient accumulation included) and the optimizer steps of one epoch, so a
schedule never spells ``max_epochs`` itself.

A planned schedule's lr is a function of the optimizer step and the plan only. The plan is
made anew every time training starts and a checkpoint restores only the step count, so:

- a resumed run with unchanged settings continues at exactly the lr it would have had;
- a run resumed with a longer ``trainer.max_epochs`` ("train 10 more epochs") is re-planned
  over the new total: the lr continues on the longer curve from the step reached (a
  finished cosine run ended near 0 and rises to where the longer curve is at that step);
- a different warm-up length is re-planned the same way.

:class:`OneCycle` cannot be re-planned (its momentum cycle is fixed at the start): a
resume with another total number of steps is refused.
"""

import logging
import math
from typing import Any

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR, OneCycleLR

from platekit._errors import UserError

log = logging.getLogger(__name__)


def warmup_length(warmup_steps: int, warmup_epochs: float, steps_per_epoch: int | None) -> int:
    """Warm-up in optimizer steps: ``warmup_steps``, or ``warmup_epochs`` of optimizer steps."""
    if warmup_steps and warmup_epochs:
        raise UserError(
            f"scheduler.warmup_steps={warmup_steps} and scheduler.warmup_epochs={warmup_epochs} "
            "are both set; set one (the other to 0)"
        )
    if warmup_steps < 0 or warmup_epochs < 0:
        raise UserError("scheduler warm-up must be 0 or more; set warmup_steps or warmup_epochs")
    if not warmup_epochs:
        return int(warmup_steps)
    if steps_per_epoch is None:
        raise UserError(
            f"scheduler.warmup_epochs={warmup_epochs} needs a training loader with a length; "
            "give scheduler.warmup_steps instead"
        )
    return round(warmup_epochs * steps_per_epoch)


class PlannedLR(LambdaLR):
    """torch's ``LambdaLR`` with ``lr = base_lr x multiplier(step)``: linear warm-up, then the
    subclass's decay; its state is the step count, its plan made anew by each run.

    Args:
        optimizer: the optimizer whose groups it sets.
        total_steps: optimizer steps of the whole run (given by the model).
        steps_per_epoch: optimizer steps of one epoch (given by the model), or ``None``.
        warmup_steps: linear warm-up over this many optimizer steps: step ``k`` (from 0)
            of the warm-up runs at ``base_lr x (k + 1) / warmup_steps``.
        warmup_epochs: or the warm-up in epochs, turned into optimizer steps.
    """

    RESTORED = ("last_epoch", "_step_count", "base_lrs")  # the plan itself is never restored

    def __init__(
        self,
        optimizer: Optimizer,
        total_steps: int,
        steps_per_epoch: int | None = None,
        warmup_steps: int = 0,
        warmup_epochs: float = 0.0,
    ) -> None:
        self.total_steps = max(1, int(total_steps))
        self.warmup_steps = warmup_length(warmup_steps, warmup_epochs, steps_per_epoch)
        if self.warmup_steps >= self.total_steps:
            raise UserError(
                f"the warm-up ({self.warmup_steps} optimizer steps) is not shorter than the "
                f"run ({self.total_steps} steps); shorten scheduler.warmup_steps/warmup_epochs "
                "or train longer"
            )
        super().__init__(optimizer, self.multiplier)

    def multiplier(self, step: int) -> float:
        """The factor on the base lr at optimizer step ``step`` (counted from 0)."""
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        progress = (step - self.warmup_steps) / (self.total_steps - self.warmup_steps)
        return self.decay(min(1.0, progress))

    def decay(self, progress: float) -> float:
        """The factor after the warm-up, at ``progress`` from 0 (start) to 1 (end)."""
        return 1.0

    def state_dict(self) -> dict[str, Any]:
        state = {key: self.__dict__[key] for key in self.RESTORED}
        state["plan"] = {"total_steps": self.total_steps, "warmup_steps": self.warmup_steps}
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the step count (and base lrs); keep this run's plan and set its lr now."""
        for key in self.RESTORED:
            if key in state_dict:
                setattr(self, key, state_dict[key])
        old = state_dict.get("plan", {})
        new = {"total_steps": self.total_steps, "warmup_steps": self.warmup_steps}
        if old and old != new:
            log.info(
                "lr schedule re-planned for this run: %s -> %s (at optimizer step %d)",
                old,
                new,
                self.last_epoch,
            )
        lrs = [float(base) * self.multiplier(self.last_epoch) for base in self.base_lrs]
        for group, lr in zip(self.optimizer.param_groups, lrs, strict=True):
            group["lr"] = lr
        self._last_lr = list(lrs)


class Constant(PlannedLR):
    """The optimizer's lr throughout (after the warm-up, if any)."""


class Cosine(PlannedLR):
    """Cosine decay from the base lr to ``min_lr_ratio x`` base lr at the end of the run."""

    def __init__(
        self, optimizer: Optimizer, total_steps: int, min_lr_ratio: float = 0.0, **plan: Any
    ) -> None:
        self.min_lr_ratio = min_lr_ratio
        super().__init__(optimizer, total_steps, **plan)

    def decay(self, progress: float) -> float:
        cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
        return self.min_lr_ratio + (1.0 - self.min_lr_ratio) * cosine


class StepDecay(PlannedLR):
    """Multiply the lr by ``gamma`` at each milestone, a fraction of the run (e.g. 0.5)."""

    def __init__(
        self,
        optimizer: Optimizer,
        total_steps: int,
        milestones: tuple[float, ...] = (0.5, 0.75),
        gamma: float = 0.1,
        **plan: Any,
    ) -> None:
        if not all(0 < m < 1 for m in milestones):
            raise UserError(
                f"scheduler.milestones={list(milestones)} must be fractions of the run "
                "between 0 and 1, e.g. [0.5, 0.75]"
            )
        self.milestones = tuple(sorted(milestones))
        self.gamma = gamma
        super().__init__(optimizer, total_steps, **plan)

    def decay(self, progress: float) -> float:
        return self.gamma ** sum(progress >= milestone for milestone in self.milestones)


class OneCycle(OneCycleLR):
    """torch's one-cycle policy over the run's optimizer steps, peaking at the optimizer's lr.

    It cannot run past its total: a resume with a different number of steps is refused.
    """

    def __init__(
        self,
        optimizer: Optimizer,
        total_steps: int,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
    ) -> None:
        super().__init__(
            optimizer,
            max_lr=[group["lr"] for group in optimizer.param_groups],
            total_steps=int(total_steps),
            pct_start=pct_start,
            div_factor=div_factor,
            final_div_factor=final_div_factor,
        )

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        saved = state_dict.get("total_steps")
        if saved != self.total_steps:
            raise UserError(
                f"scheduler=onecycle cannot change length on resume: the checkpoint's cycle "
                f"has {saved} optimizer steps, this run {self.total_steps}; resume with the "
                "same trainer.max_epochs/max_steps, or start a new run with init_from="
            )
        super().load_state_dict(state_dict)
