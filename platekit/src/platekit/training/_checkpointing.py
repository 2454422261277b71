"""Checkpoints that survive pre-emption: ``last.ckpt`` always holds the newest state."""

import warnings
from pathlib import Path
from typing import Any

from lightning import LightningModule, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.utilities.exceptions import SIGTERMException
from torch import Tensor

from platekit._errors import UserError

# Lightning 2.6's warning for a checkpoint directory that holds files (tests: still its words).
NOT_EMPTY = r"Checkpoint directory .* exists and is not empty\."


class PreemptibleCheckpoint(ModelCheckpoint):
    """Lightning's ModelCheckpoint, with a ``last.ckpt`` that is never behind.

    Lightning (2.6) rewrites ``last.ckpt`` only when it also saves a top-k checkpoint, so
    after epochs where the monitored metric did not improve it lags behind. With
    ``save_last: true``, ``last.ckpt`` is also written after every epoch, at the end of
    training (e.g. a ``max_steps`` stop) and every ``last_every_n_steps`` optimizer steps;
    on SIGTERM or Ctrl-C, which Lightning raises as ``SIGTERMException`` after the current
    step (``training/_signals.py``), it is written whatever ``save_last`` says.
    ``ckpt_path=last`` resumes from it exactly.

    These extra writes go straight through the trainer, so Lightning's own bookkeeping
    (which skips its top-k save at a step it already saved) stays as it would be.

    Args:
        last_every_n_steps: also write ``last.ckpt`` after every this many optimizer
            steps, so a killed run loses at most that many; 0: only at the points above.
        **kwargs: ``ModelCheckpoint``'s arguments.
    """

    def __init__(self, *, last_every_n_steps: int = 0, **kwargs: Any) -> None:
        if last_every_n_steps < 0:
            raise UserError(
                f"callbacks.model_checkpoint.last_every_n_steps={last_every_n_steps} must "
                "be >= 0 (0 writes last.ckpt only after each epoch)"
            )
        super().__init__(**kwargs)
        if last_every_n_steps and self.save_last is not True:
            raise UserError(
                f"callbacks.model_checkpoint.last_every_n_steps={last_every_n_steps} writes "
                f"last.ckpt, but save_last={self.save_last}; set save_last: true"
            )
        self.last_every_n_steps = last_every_n_steps
        self._lightning_last_writes = 0  # times Lightning itself wrote last.ckpt
        self._step_in_last = -1  # the global step last.ckpt was last written at
        self._step_seen = -1  # the global step at the previous batch end
        # Set by build_trainer for a resumed run, whose directory holds its checkpoints.
        self.continues_run = False

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        super().on_train_start(trainer, pl_module)
        self._step_seen = trainer.global_step  # a resumed run's step is in its checkpoint

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, index: int
    ) -> None:
        super().on_train_batch_end(trainer, pl_module, outputs, batch, index)
        step = trainer.global_step
        # Under gradient accumulation only the batch that completes an optimizer step counts:
        # a write after any other would record batches whose gradients it does not hold.
        stepped, self._step_seen = step != self._step_seen, step
        if stepped and self.last_every_n_steps and step % self.last_every_n_steps == 0:
            self._write_last(trainer)

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        writes = self._lightning_last_writes
        super().on_train_epoch_end(trainer, pl_module)
        # Unless Lightning wrote it just now, write it: validation and the callbacks' epoch
        # ends have changed state since any earlier write at this step.
        if self._lightning_last_writes == writes:
            self._write_last(trainer)

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        super().on_train_end(trainer, pl_module)
        if trainer.global_step != self._step_in_last:
            self._write_last(trainer)

    def on_exception(
        self, trainer: Trainer, pl_module: LightningModule, exception: BaseException
    ) -> None:
        if isinstance(exception, SIGTERMException) and self.dirpath is not None:
            trainer.save_checkpoint(self.last_path, self.save_weights_only)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Lightning's restore, for a run directory that moved (copied, or mounted elsewhere).

        Lightning forgets the best score when ``dirpath`` differs from the stored one, so
        the next epoch became "best" however it scored, and the run tested it. Here the
        stored checkpoints are looked up by name in this run's own folder: those present
        are the run's, with their scores; those absent are dropped.
        """
        stored = state_dict.get("dirpath")
        if self.dirpath is None or stored is None or str(stored) == str(self.dirpath):
            super().load_state_dict(state_dict)
            return
        here = Path(str(self.dirpath))

        def moved(path: Any) -> str:
            name = Path(str(path)).name if path else ""
            return (
                str(here / name)
                if name.endswith(self.FILE_EXTENSION) and (here / name).is_file()
                else ""
            )

        best_k = {
            moved(path): score for path, score in (state_dict.get("best_k_models") or {}).items()
        }
        best_k.pop("", None)
        best = moved(state_dict.get("best_model_path"))
        super().load_state_dict(
            {
                **state_dict,
                "dirpath": self.dirpath,
                "best_model_path": best,
                "best_model_score": state_dict.get("best_model_score") if best else None,
                "best_k_models": best_k,
                "kth_best_model_path": moved(state_dict.get("kth_best_model_path")),
                "last_model_path": moved(state_dict.get("last_model_path")),
            }
        )

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        """Lightning's set-up. Its warning that the directory holds checkpoints already guards
        a new run from mixing with another's; a resumed run continues in its own directory,
        so for it the warning does not apply (tests/training/test_signals.py: not shown)."""
        with warnings.catch_warnings():
            if self.continues_run:
                warnings.filterwarnings("ignore", message=NOT_EMPTY)
            super().setup(trainer, pl_module, stage)

    def _save_last_checkpoint(
        self, trainer: Trainer, monitor_candidates: dict[str, Tensor]
    ) -> None:
        """Lightning's own write of ``last.ckpt``, counted."""
        super()._save_last_checkpoint(trainer, monitor_candidates)
        self._lightning_last_writes += 1
        self._step_in_last = trainer.global_step

    def _write_last(self, trainer: Trainer) -> None:
        fast_dev_run = trainer.fast_dev_run  # type: ignore[attr-defined]  # set outside Trainer
        if self.save_last is not True or self.dirpath is None or fast_dev_run:
            return  # save_last "link" keeps Lightning's meaning: a link to the newest top-k
        self.last_model_path = str(self.last_path)
        trainer.save_checkpoint(self.last_path, self.save_weights_only)
        self._step_in_last = trainer.global_step

    @property
    def last_path(self) -> Path:
        return Path(str(self.dirpath)) / f"{self.CHECKPOINT_NAME_LAST}{self.FILE_EXTENSION}"
