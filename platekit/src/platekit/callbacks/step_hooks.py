"""Keep Lightning from calling per-step hooks that a callback leaves as no-ops.

Lightning calls every hook on every callback, no-ops included, and each call costs a few
microseconds (more once the model's step has evicted the interpreter from the CPU caches).
Six hooks run per training step, so a callback that acts only per epoch (early stopping,
history, a learning-rate monitor) costs 1-2% of a millisecond-scale step. Lightning skips a
hook whose attribute is not callable; setting the unused ones to ``None`` on the instance
removes their cost and leaves every hook a callback implements untouched.
"""

from collections.abc import Iterable

from lightning import Callback

STEP_HOOKS = (
    "on_train_batch_start",
    "on_before_backward",
    "on_after_backward",
    "on_before_optimizer_step",
    "on_before_zero_grad",
    "on_train_batch_end",
)


def skip_unused_step_hooks(callbacks: Iterable[Callback]) -> None:
    """Set each per-step hook a callback inherits from ``Callback`` unchanged to ``None``."""
    for callback in callbacks:
        for hook in STEP_HOOKS:
            inherited = getattr(type(callback), hook) is getattr(Callback, hook)
            if inherited and hook not in vars(callback):
                setattr(callback, hook, None)
