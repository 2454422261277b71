"""SIGTERM, Ctrl-C (SIGINT), SIGHUP and SIGQUIT: stop after the current step, save, exit with
a known code.

The train command owns these signals for its whole process: ``RunStart`` installs the
handler before Hydra writes anything. SIGHUP (the terminal of a foreground ``make train``
closed) and SIGQUIT (Ctrl-\\) save and exit as SIGTERM does; after SIGHUP the output that
went to the closed terminal goes nowhere (``train.log`` keeps it). (Left to Lightning, a
Ctrl-C exits 1 without saving, swallows a second one, SIGHUP and SIGQUIT kill the run
unsaved, and Lightning restores the default handlers at teardown, so a late second SIGTERM
kills the process with 143.) Every one goes one way, Lightning's SIGTERM stop:

- The first signal while training: Lightning stops after the current optimizer step (at
  the step's end ``StopAfterStep`` hands the stop to Lightning's SIGTERM handler; under DDP
  every rank at the same step, whichever ranks got the signal), or during a validation
  after the current batch (the resume runs that validation again in full);
  ``PreemptibleCheckpoint`` writes ``last.ckpt``, and the command says how to continue
  (``ckpt_path=last``) and exits 0 after SIGTERM (SIGHUP, SIGQUIT), 130 after Ctrl-C (so
  ``make train && make export`` stops there).
- The first signal before or after training (setup, testing): nothing to save; it exits
  at once with the same codes.
- SIGTERM (SIGHUP, SIGQUIT) again: ignored, the save goes on (schedulers may signal more
  than once).
- Ctrl-C again: exits 130 at once. Files are written whole or not at all
  (``files.write_atomic``), so ``last.ckpt`` is the previous one or the new one.

DataLoader workers forked from the process inherit the handler, which does nothing in
them: the terminal sends Ctrl-C to the whole process group, and the main process decides.
"""

import atexit
import contextlib
import logging
import os
import signal
import stat
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from lightning import Callback, LightningModule, Trainer

from platekit.config._resume import last_checkpoint_of

log = logging.getLogger(__name__)

EXIT_CODES = {signal.SIGTERM: 0, signal.SIGINT: 130, signal.SIGHUP: 0, signal.SIGQUIT: 0}


class StopSignals:
    """The handler of the stop signals (``EXIT_CODES``); the process has one, ``STOP_SIGNALS``."""

    def __init__(self) -> None:
        self.received: signal.Signals | None = None  # the first stop signal
        self.training = False  # set by StopAfterStep while Lightning trains
        self._pid: int | None = None  # the process that installed the handler
        self._passing_on = False  # a stop being handed to Lightning's SIGTERM handler
        self._lightning: Any = None  # Lightning's SIGTERM handler while it trains
        self._decided = False  # the stop is handed to Lightning (its launcher signals ranks)

    def install(self) -> None:
        """Handle the stop signals in this process from now on."""
        self._pid = os.getpid()
        for signum in EXIT_CODES:
            signal.signal(signum, self._on_signal)
        atexit.register(self._keep_exit_code)

    @property
    def decided(self) -> bool:
        """Whether the stop is handed to Lightning already."""
        return self._decided

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.received or signal.SIGTERM]

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        """The first signal asks training to stop after the current step (or exits at once
        when nothing is training); a second is ``_again``'s."""
        if os.getpid() != self._pid or self._passing_on:
            return  # in a forked DataLoader worker, or our own Ctrl-C back from Lightning
        received = signal.Signals(signum)
        if self.received is not None:
            self._again(received)
            return
        self.received = received
        if received == signal.SIGHUP:
            away_from_closed_terminal()
        if not self.training:
            log.warning(
                "stopped by %s before or after training, with nothing to save; "
                "ckpt_path=last continues from the newest last.ckpt",
                received.name,
            )
            raise SystemExit(self.exit_code)
        again = "; Ctrl-C again stops at once" if received == signal.SIGINT else ""
        log.warning("%s: stopping after the current step to save last.ckpt%s", received.name, again)

    def take_over_sigterm(self) -> None:
        """While Lightning trains, keep SIGTERM here: Lightning's handler (which, under DDP,
        broadcasts from inside the signal handler and so hangs two ranks signalled at once)
        is called only when ``StopAfterStep`` decides the stop at a step's end."""
        handler = signal.getsignal(signal.SIGTERM)
        if os.getpid() == self._pid and callable(handler) and handler != self._on_signal:
            self._lightning = handler
            signal.signal(signal.SIGTERM, self._on_signal)

    def stop_lightning(self) -> None:
        """Stop as on SIGTERM after this step: call Lightning's SIGTERM handler (it calls the
        one it replaced, this one, in turn: ignored). Every rank calls it at the same step."""
        self.received = self.received or signal.SIGTERM  # a rank stopped by another's signal
        self._decided = True
        handler = self._lightning or signal.getsignal(signal.SIGTERM)
        if not callable(handler) or handler == self._on_signal:
            raise SystemExit(self.exit_code)  # Lightning is not training after all
        # Lightning's handler would log "Received SIGTERM" for a Ctrl-C: quiet it meanwhile.
        lightning_log = logging.getLogger(type(handler).__module__)
        quiet, lightning_log.disabled = lightning_log.disabled, True
        self._passing_on = True
        try:
            handler(signal.SIGTERM, None)
        finally:
            self._passing_on = False
            lightning_log.disabled = quiet

    def _keep_exit_code(self) -> None:
        """At exit the outcome is decided: ignore SIGTERM, and Ctrl-C if stopping already.

        Python resets its handlers to the default while the interpreter shuts down, after
        this; a signal then would kill the process (143, or -2) instead of its exit code.
        """
        if os.getpid() != self._pid:
            return
        for signum in EXIT_CODES:
            if signum != signal.SIGINT or self.received is not None:
                signal.signal(signum, signal.SIG_IGN)

    def _again(self, received: signal.Signals) -> None:
        if received != signal.SIGINT:
            if not (self._decided and received == signal.SIGTERM):  # not Lightning's echo
                log.warning("%s again: still stopping", received.name)
            return
        sys.stdout.flush()
        sys.stderr.write("\nCtrl-C again: stopping now; last.ckpt is the last one written whole\n")
        sys.stderr.flush()
        os._exit(EXIT_CODES[signal.SIGINT])


STOP_SIGNALS = StopSignals()


def away_from_closed_terminal() -> None:
    """Point the standard output and error at /dev/null where they are a terminal (a
    character device): after a hang-up each write to it fails (EIO), and a failing print
    must not stop the save. (``isatty`` is False on a hung-up terminal; files and pipes
    keep the output.)"""
    sink = os.open(os.devnull, os.O_WRONLY)
    try:
        null = os.fstat(sink).st_rdev
        for fd in (1, 2):
            with contextlib.suppress(OSError):
                status = os.fstat(fd)
                if stat.S_ISCHR(status.st_mode) and status.st_rdev != null:
                    os.dup2(sink, fd)
    finally:
        os.close(sink)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()  # what waited for the terminal goes nowhere now


class StopAfterStep(Callback):
    """Tells ``STOP_SIGNALS`` when Lightning trains, and stops Lightning after the optimizer
    step in which a stop signal came: under DDP, after the first step that ends with a signal
    on any rank (one all-reduce of a flag per batch), so every rank stops after the same step.

    Under gradient accumulation a batch that ends no optimizer step holds gradients not yet
    applied, which a checkpoint does not keep: the stop waits for the batch that steps.
    """

    def __init__(self) -> None:
        self._step = -1  # the global step at the previous batch end

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        STOP_SIGNALS.training = True
        STOP_SIGNALS.take_over_sigterm()
        self._step = trainer.global_step  # a resumed run's step is in its checkpoint

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, index: int
    ) -> None:
        stepped, self._step = trainer.global_step != self._step, trainer.global_step
        stop = STOP_SIGNALS.received is not None and stepped
        if trainer.world_size > 1:
            stop = trainer.strategy.reduce_boolean_decision(stop, all=False)
        if stop:
            STOP_SIGNALS.stop_lightning()

    def on_validation_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        index: int,
        dataloader_idx: int = 0,
    ) -> None:
        """A signal during fit's validation stops it after this batch (a validation can
        outlast a scheduler's grace period); the checkpoint marks the validation to run
        again in full on the resume (training/_exact_resume.py)."""
        if not STOP_SIGNALS.training or trainer.sanity_checking or STOP_SIGNALS.decided:
            return
        stop = STOP_SIGNALS.received is not None
        if trainer.world_size > 1:  # every rank validates as many batches
            stop = trainer.strategy.reduce_boolean_decision(stop, all=False)
        if stop:
            STOP_SIGNALS.stop_lightning()

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        # Lightning stops on a signal no later than here; a later one stops at once.
        STOP_SIGNALS.training = False

    def on_exception(
        self, trainer: Trainer, pl_module: LightningModule, exception: BaseException
    ) -> None:
        STOP_SIGNALS.training = False


def stopped_by_signal(trainer: Trainer, run_dir: Path) -> dict[str, Any]:
    """After Lightning's stop on a signal: say where ``last.ckpt`` is and how to continue.

    After Ctrl-C, exit 130; after SIGTERM, return what a stopped run reports (the command
    exits 0). A rank stopped by rank 0's signal, or a run with no handler installed (a
    test calling ``train`` itself), counts as stopped by SIGTERM.
    """
    name = (STOP_SIGNALS.received or signal.SIGTERM).name
    log.warning(
        "stopped by %s after step %d; saved %s; continue with ckpt_path=last",
        name,
        trainer.global_step,
        last_checkpoint_of(run_dir),
    )
    if STOP_SIGNALS.exit_code:
        raise SystemExit(STOP_SIGNALS.exit_code)
    return {"stopped": name, "steps": trainer.global_step, "run_dir": str(run_dir)}
