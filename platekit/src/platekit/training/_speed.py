"""Training speed, one definition for the epoch lines, the summary and metrics.json.

**steps/s** is optimizer steps taken per second of training: each epoch is timed from its
start to the end of its last batch, and the validation that runs inside it is taken out;
start-up, the sanity check and testing are not training and are not counted. Under DDP
every process takes the same steps in lockstep, so steps/s is the run's rate (samples/s
is steps/s x batch size x world size).
"""

import time

from lightning import Callback, LightningModule, Trainer


def steps_per_second(steps: int, seconds: float) -> float | None:
    """``steps / seconds``, or None when no time was measured."""
    return steps / seconds if seconds > 0 else None


class StepClock:
    """Optimizer steps and training seconds, per epoch and in total (validation excluded)."""

    def __init__(self) -> None:
        self.steps = 0  # over every epoch finished so far
        self.seconds = 0.0
        self.epoch_steps = 0  # the last finished epoch's
        self.epoch_seconds = 0.0
        self._started: float | None = None
        self._first_step = 0
        self._validation_started: float | None = None
        self._validation_seconds = 0.0

    def epoch_start(self, global_step: int) -> None:
        self._started = time.perf_counter()
        self._first_step = global_step
        self._validation_seconds = 0.0

    def validation_start(self) -> None:
        if self._started is not None:
            self._validation_started = time.perf_counter()

    def validation_end(self) -> None:
        if self._validation_started is not None:
            self._validation_seconds += time.perf_counter() - self._validation_started
            self._validation_started = None

    def epoch_end(self, global_step: int) -> float | None:
        """Close the epoch; returns its steps/s."""
        if self._started is None:
            return None
        seconds = time.perf_counter() - self._started - self._validation_seconds
        self.epoch_steps, self.epoch_seconds = global_step - self._first_step, seconds
        self.steps += self.epoch_steps
        self.seconds += seconds
        self._started = None
        return steps_per_second(self.epoch_steps, seconds)

    @property
    def rate(self) -> float | None:
        """steps/s over every finished epoch."""
        return steps_per_second(self.steps, self.seconds)


class TrainSpeed(Callback):
    """A ``StepClock`` driven by the trainer: what the run summary's steps/s reads."""

    def __init__(self) -> None:
        self.clock = StepClock()

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        # A run resumed mid-epoch gets no on_train_epoch_start for that epoch: begin it here.
        self.clock.epoch_start(trainer.global_step)

    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.clock.epoch_start(trainer.global_step)

    def on_validation_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if not trainer.sanity_checking:
            self.clock.validation_start()

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if not trainer.sanity_checking:
            self.clock.validation_end()

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.clock.epoch_end(trainer.global_step)
