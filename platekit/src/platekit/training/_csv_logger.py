"""A CSV metric logger whose file a resumed run continues instead of replacing."""

import csv

from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter
from lightning.pytorch.loggers.logger import rank_zero_experiment


class ContinuingWriter(ExperimentWriter):
    """Lightning's writer deletes an existing ``metrics.csv``; this one appends to it."""

    def _check_log_dir_exists(self) -> None:
        if self._fs.isfile(self.metrics_file_path):
            with self._fs.open(self.metrics_file_path, "r", newline="") as file:
                self.metrics_keys = next(csv.reader(file), [])  # new keys extend the header


class ResumableCSVLogger(CSVLogger):
    """``CSVLogger`` for runs that resume in their own directory: old rows are kept."""

    @property
    @rank_zero_experiment
    def experiment(self) -> ContinuingWriter:
        if self._experiment is None:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = ContinuingWriter(log_dir=self.log_dir)
        assert isinstance(self._experiment, ContinuingWriter)  # only this class sets it
        return self._experiment
