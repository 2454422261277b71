"""Data files scikit-learn ships (digits, wine, diabetes), read without importing it."""

import importlib.util
from pathlib import Path

import numpy as np


def sklearn_data_file(name: str) -> Path | None:
    """The path of a data file scikit-learn ships, found without importing scikit-learn."""
    spec = importlib.util.find_spec("sklearn")
    path = Path(spec.origin).parent / "datasets" / "data" / name if spec and spec.origin else None
    return path if path is not None and path.is_file() else None


def read_sklearn_table(name: str, skip_rows: int = 0) -> np.ndarray | None:
    """The numbers of a CSV table scikit-learn ships (``digits.csv.gz``), or None if absent.

    Importing scikit-learn to call its loaders would add about half a second to every start.
    """
    path = sklearn_data_file(name)
    if path is None:
        return None
    return np.loadtxt(path, delimiter=",", dtype=np.float64, skiprows=skip_rows)
