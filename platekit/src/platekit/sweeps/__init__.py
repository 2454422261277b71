"""Optuna sweeps for ``sweep.py``: search space, shared storage, workers, pruning, report."""
