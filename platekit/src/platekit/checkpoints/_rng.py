"""Every random number generator a run draws from, captured as tensors and restored.

Checkpoints must load with ``torch.load(weights_only=True)``, so the states are stored as
tensors rather than the tuples and arrays the libraries hand out.
"""

import math
import random

import numpy as np
import torch
from torch import Tensor

from platekit._errors import UserError

RNGState = dict[str, Tensor]


def capture_rng() -> RNGState:
    """The states of torch (CPU and every CUDA device), numpy and python ``random``."""
    numpy_state = np.random.get_state(legacy=True)
    if isinstance(numpy_state, dict):  # only for bit generators other than MT19937
        raise TypeError("numpy's global generator is not MT19937: its state cannot be saved")
    _, keys, position, has_gauss, gauss = numpy_state
    version, python_state, python_gauss = random.getstate()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.stack(cuda) if cuda else torch.empty(0, dtype=torch.uint8),
        "numpy_keys": torch.from_numpy(keys.astype(np.int64)),
        "numpy_position": torch.tensor([position, has_gauss], dtype=torch.int64),
        "numpy_gauss": torch.tensor(gauss, dtype=torch.float64),
        "python": torch.tensor([version, *python_state], dtype=torch.int64),
        "python_gauss": torch.tensor(math.nan if python_gauss is None else python_gauss),
    }


def check_rng(state: object, source: str = "the checkpoint") -> RNGState:
    """``state`` if it holds every generator's state as :func:`capture_rng` writes it (the
    same keys, dtypes and shapes; numpy's position in range); else one UserError line.

    A state of another shape failed deep in torch or numpy ("wrong size", blamed on the net).
    """
    fresh = capture_rng()
    problem = None
    if not isinstance(state, dict):
        problem = f"is a {type(state).__name__}"
    else:
        for key, expected in fresh.items():
            value = state.get(key)
            if not isinstance(value, Tensor) or value.dtype != expected.dtype:
                problem = f"holds {key} as {describe(value)}, not {describe(expected)}"
            elif key != "cuda" and value.shape != expected.shape:
                problem = f"holds {key} of shape {list(value.shape)}, not {list(expected.shape)}"
            elif key == "cuda" and value.numel() and (value.dim() != 2 or value.shape[1] < 1):
                problem = f"holds cuda of shape {list(value.shape)}"
            if problem:
                break
        else:
            position, has_gauss = state["numpy_position"].tolist()
            if not (0 <= position <= len(state["numpy_keys"]) and has_gauss in (0, 1)):
                problem = f"holds numpy's position {position} (0 to 624) and flag {has_gauss}"
    if problem is not None:
        raise UserError(
            f"{source}'s random-number states are not ones this project writes ({problem}); "
            "resume from a checkpoint of this project's train, or start from its weights "
            "with init_from=..."
        )
    assert isinstance(state, dict)
    return state


def describe(value: object) -> str:
    if isinstance(value, Tensor):
        return f"a {str(value.dtype).removeprefix('torch.')} tensor"
    return f"a {type(value).__name__}"


def restore_rng(state: RNGState) -> None:
    """Put back what :func:`capture_rng` captured."""
    torch.set_rng_state(state["torch"])
    cuda = state["cuda"]
    if len(cuda) and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(list(cuda))
    position, has_gauss = state["numpy_position"].tolist()
    keys = state["numpy_keys"].numpy().astype(np.uint32)
    np.random.set_state(("MT19937", keys, position, has_gauss, state["numpy_gauss"].item()))
    version, *python_state = state["python"].tolist()
    gauss = state["python_gauss"].item()
    random.setstate((version, tuple(python_state), None if math.isnan(gauss) else gauss))
