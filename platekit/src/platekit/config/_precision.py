"""Resolve ``trainer.precision``: ``auto`` picks what the device runs fast and safely.

``auto`` gives ``bf16-mixed`` on CUDA GPUs with bfloat16 (Ampere on), ``16-mixed`` with loss
scaling on older ones, and ``32-true`` everywhere else, CPUs with AVX512-BF16/AMX included:
measured on one (2 cores, alternated pairs, 10 epochs each), ``bf16-mixed`` ran the default
digits CNN at 1.08-1.22x the steps/s of ``32-true`` but the wine-table MLP at 0.70-0.84x, and
``auto`` takes bf16 on a CPU only where it is clearly faster (>= 1.1x) for both. Settings
Lightning would silently change or run very slowly are refused with the fix.
"""

from platekit._errors import UserError

PRESETS = ("auto", "32-true", "bf16-mixed", "16-mixed", "bf16-true", "16-true", "64-true")
# Lightning's short names, accepted and spelled out.
ALIASES = {"32": "32-true", "16": "16-mixed", "bf16": "bf16-mixed", "64": "64-true"}


def resolve_precision(requested: str | int, accelerator: str) -> str:
    """The Lightning precision to train with, for ``trainer.precision`` on ``accelerator``.

    Raises:
        UserError: the value is not a preset, or is a half precision CPUs handle badly.
    """
    name = ALIASES.get(str(requested), str(requested))
    if name not in PRESETS:
        raise UserError(
            f"trainer.precision={requested} is not a precision preset; use one of "
            f"{', '.join(PRESETS)}"
        )
    device = device_type(accelerator)
    if name == "auto":
        return auto_precision(device, has_bf16(device))
    if device == "cpu" and name == "16-mixed":
        raise UserError(
            "trainer.precision=16-mixed on CPU would silently run as bf16-mixed; "
            "use trainer.precision=bf16-mixed, 32-true or auto"
        )
    if device == "cpu" and name == "16-true":
        raise UserError(
            "trainer.precision=16-true on CPU runs about 30x slower than 32-true; "
            "use trainer.precision=auto, bf16-mixed or 32-true"
        )
    return name


def auto_precision(device: str, bf16: bool) -> str:
    """What ``auto`` means on a ``device`` type (``cuda``, ``cpu``, ``mps``, ...)."""
    if device == "cuda":
        return "bf16-mixed" if bf16 else "16-mixed"  # 16-mixed: Lightning adds a loss scaler
    return "32-true"


def auto_reason(accelerator: str) -> str:
    """Why ``auto`` chose what it did on ``accelerator``, for the run header."""
    device = device_type(accelerator)
    if device == "cuda":
        return "auto: this GPU has bfloat16" if has_bf16(device) else "auto: no bfloat16 here"
    if device == "cpu":
        return "auto: float32 on a CPU, where bf16-mixed is slower for small nets"
    return "auto"


def device_type(accelerator: str) -> str:
    """The device ``trainer.accelerator`` trains on, choosing as Lightning's ``auto`` does."""
    import torch  # here, not at the top: the config check imports this module for PRESETS

    if accelerator in ("gpu", "cuda"):
        return "cuda"
    if accelerator != "auto":
        return accelerator
    if torch.backends.mps.is_available():
        return "mps"
    return "cuda" if torch.cuda.is_available() else "cpu"


def has_bf16(device: str) -> bool:
    """Whether ``device`` computes in bfloat16 natively (not emulated)."""
    import torch

    if device == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)
    if device == "cpu":
        return cpu_has_bf16()
    return False


def cpu_has_bf16() -> bool:
    """oneDNN's own check: AVX512-BF16 or AMX on x86, BF16 on Arm."""
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a build without oneDNN
        return False
