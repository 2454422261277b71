"""Only allowlisted code may be built from what a checkpoint says.

``weights_only=True`` stops pickled code, but a checkpoint also names classes to build
(``_target_`` of its net, optimizer, scheduler and data module). Those strings are code the
file chooses: ``shutil.copyfile`` or ``builtins.open`` pass Hydra's own checks. Every target
read from a checkpoint must lie under an allowed prefix, checked before anything is built.
"""

from collections.abc import Iterable, Iterator
from typing import Any

from ..cli.errors import UserError

PACKAGE = __name__.split(".")[0]
ALLOWED = (f"{PACKAGE}.", "torch.nn.", "torch.optim.")


def targets_in(node: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """Every ``(key path, target)`` in a nested config of dicts and lists."""
    if isinstance(node, dict):
        for key, value in node.items():
            path = f"{where}.{key}" if where else str(key)
            if key in ("_target_", "_component_") or (key == "path" and "_partial_" in node):
                yield path, str(value)
            else:
                yield from targets_in(value, path)
    elif isinstance(node, list | tuple):
        for i, value in enumerate(node):
            yield from targets_in(value, f"{where}[{i}]")


def check_targets(node: Any, source: str, extra: Iterable[str] = ()) -> None:
    """Raise a UserError if ``node`` names a target outside the allowlist; build nothing.

    Args:
        node: settings read from a checkpoint (plain dicts and lists).
        source: the checkpoint's path, for the message.
        extra: more allowed prefixes, from the config's ``checkpoint_targets``.
    """
    allowed = (*ALLOWED, *(prefix for prefix in extra if prefix))
    for path, target in targets_in(node):
        if not target.startswith(allowed):
            raise UserError(
                f"checkpoint '{source}' names '{target}' at {path}, which is not on the "
                f"allowlist ({', '.join(allowed)}); refused without building it. If you trust "
                "the file and the code, add the prefix to checkpoint_targets=[...]"
            )
