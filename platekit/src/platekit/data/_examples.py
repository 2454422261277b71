"""The example tables platekit ships (digits, wine, diabetes): ``examples/SOURCES.md``.

They are scikit-learn's copies, shipped here so that no project installs scikit-learn (and
SciPy, which Lightning then imports at every start) for three small files.
"""

from pathlib import Path

import numpy as np

from platekit._errors import UserError

EXAMPLES = Path(__file__).parent / "examples"


def example_file(name: str) -> Path:
    """The path of an example file platekit ships (``digits.csv.gz``)."""
    path = EXAMPLES / name
    if not path.is_file():
        raise UserError(
            f"platekit's example file {name} is missing from {EXAMPLES}; reinstall platekit"
        )
    return path


def read_example_table(name: str, skip_rows: int = 0) -> np.ndarray:
    """The numbers of an example CSV table platekit ships (``digits.csv.gz``), as float64."""
    return np.loadtxt(example_file(name), delimiter=",", dtype=np.float64, skiprows=skip_rows)


# platekit 0.3's name, which read the table from an installed scikit-learn.
read_sklearn_table = read_example_table
