"""Stop a trial early when the pruner judges its validation metric hopeless."""

from lightning import Callback, LightningModule, Trainer
from optuna.trial import Trial

from platekit.models._tasks import task_of
from platekit.training._summary import MONITOR


class PruneBadTrials(Callback):
    """Report ``monitor`` to the Optuna trial after each epoch's validation; when the pruner
    says prune (and epochs remain), stop training the way early stopping does.

    The run then ends normally (best checkpoint tested, metrics.json and plots written), so a
    pruned trial keeps a complete run directory; the sweep marks the trial PRUNED.
    Steps are epochs, so trials with different batch sizes compare like with like.
    """

    def __init__(self, trial: Trial, monitor: str) -> None:
        self.trial = trial
        self.monitor = monitor
        self.pruned_epoch: int | None = None
        self._reported: set[int] = set()

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.sanity_checking or self.pruned_epoch is not None:
            return
        name, sign = self.monitor, 1.0
        if name == MONITOR:  # the task's monitored metric, signed so that larger is better
            task = task_of(pl_module)
            name, sign = task.monitor, (1.0 if task.mode == "max" else -1.0)
        value = trainer.callback_metrics.get(name)
        if value is None:  # e.g. a test/ metric: nothing to judge during training
            return
        epoch = trainer.current_epoch
        if epoch in self._reported:
            return  # validated twice in one epoch (val_check_interval < 1): the first counts
        self._reported.add(epoch)
        self.trial.report(sign * float(value), step=epoch)
        if self.trial.should_prune() and not _last_epoch(trainer):
            self.pruned_epoch = epoch
            trainer.should_stop = True


def _last_epoch(trainer: Trainer) -> bool:
    """Pruning after the last epoch saves nothing and would drop a finished trial's score."""
    return trainer.max_epochs is not None and trainer.current_epoch + 1 >= trainer.max_epochs > 0
