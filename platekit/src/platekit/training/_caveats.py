"""What a headline figure hides: high accuracy from a model that ignores a class.

A model that predicts the majority class for nearly every row scores the majority's share
as accuracy (0.9667 on a 29:1 split) while its balanced accuracy is at chance (0.5) and the
minority's recall is 0. The run's summary says so in one line, with the settings that fix it.
"""

from collections.abc import Sequence

from torch import Tensor

from platekit._errors import inert
from platekit.models._class_counts import ACC, BALANCED_ACC, square
from platekit.models._tasks import BALANCED, TEST

FIX = f"train with model.task.class_weights={BALANCED} and model.task.monitor={BALANCED_ACC}"
# Balanced accuracy within this factor of chance counts as "at chance".
NEAR_CHANCE = 1.1
# ... while accuracy exceeds it by at least this much: the headline says more than it is.
HIGH_GAP = 0.2


def headline_caveat(confusion: Tensor, class_names: Sequence[str]) -> str | None:
    """One line when accuracy misleads about the ``confusion[true, predicted]`` counts, else None.

    It speaks when a class that has rows gets no correct prediction, or when balanced
    accuracy is at chance (within ``NEAR_CHANCE`` of 1 / the classes present) while
    accuracy is ``HIGH_GAP`` above it.
    """
    counts = square(confusion).double().cpu()
    support = counts.sum(dim=1)
    present = support > 0
    classes = int(present.sum())
    if classes < 2:
        return None
    recall = counts.diagonal() / support.clamp(min=1)
    acc = float(counts.diagonal().sum() / support.sum())
    balanced = float(recall[present].mean())
    missed = [i for i in range(len(support)) if present[i] and recall[i] == 0]
    chance = 1 / classes
    at_chance = balanced <= NEAR_CHANCE * chance and acc - balanced >= HIGH_GAP
    if not missed and not at_chance:
        return None
    found = []
    if at_chance:
        found.append(
            f"balanced_acc {balanced:.4f} is at chance ({chance:.4f} for {classes} classes)"
        )
    if missed:
        named = ", ".join(
            f"'{inert(class_names[i]) if i < len(class_names) else i}' ({int(support[i])} rows)"
            for i in missed[:3]
        )
        more = f" and {len(missed) - 3} more" if len(missed) > 3 else ""
        found.append(f"no test row of {named}{more} was predicted right")
    return f"{TEST}/{ACC} {acc:.4f} misleads: {'; '.join(found)}; {FIX}"
