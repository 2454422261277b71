"""PNG plots of a run: the task's metrics and the learning rate per epoch; the test split's
confusion matrix and per-class precision and recall.

Figures are drawn with matplotlib's object API on the Agg canvas: no display is needed
and no global pyplot state is touched.
"""

from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure
from torch import Tensor

from platekit._errors import inert
from platekit._files import write_atomic
from platekit.models._class_counts import accuracies, per_class
from platekit.models._tasks import Task

Row = dict[str, float]

Curve = tuple[str, str, tuple[str, ...]]  # title, y label, the metrics drawn as one line each
LEARNING_RATE: dict[str, Curve] = {"learning_rate.png": ("Learning rate", "learning rate", ("lr",))}


def task_curves(task: Task) -> dict[str, Curve]:
    """File name -> curve for each of the task's plots (e.g. ``loss.png``, ``accuracy.png``)."""
    curves = {
        f"{stem}.png": (stem.replace("_", " ").capitalize(), label, metrics)
        for stem, (label, metrics) in task.plots().items()
    }
    return curves | LEARNING_RATE


def write_plots(
    plot_dir: Path,
    history: Sequence[Row],
    task: Task,
    confusion: Tensor | None = None,
    *,
    best_epoch: float | None = None,
    stopped_epoch: int | None = None,
    class_names: Sequence[str] | None = None,
) -> list[Path]:
    """Write every plot of ``task`` the history allows; return the files written.

    The task's metric plots mark ``best_epoch`` (the checkpoint tested) and, if early
    stopping ended the run, ``stopped_epoch``. A test ``confusion`` matrix adds
    ``confusion_matrix.png`` and ``per_class.png``, labelled with ``class_names``.
    """
    written = []
    marks = epoch_marks(best_epoch, stopped_epoch)
    for name, (title, ylabel, metrics) in task_curves(task).items():
        if any(metric in row for row in history for metric in metrics):
            shown = marks if name not in LEARNING_RATE else {}
            figure = curve_figure(history, title, ylabel, metrics, shown)
            written.append(save(figure, plot_dir / name))
    if confusion is not None:
        names = list(class_names or range(len(confusion)))
        figure = confusion_figure(confusion, names)
        written.append(save(figure, plot_dir / "confusion_matrix.png"))
        written.append(save(per_class_figure(confusion, names), plot_dir / "per_class.png"))
    return written


def epoch_marks(best_epoch: float | None, stopped_epoch: int | None) -> dict[str, float]:
    """Legend label -> epoch of each vertical line to draw."""
    marks: dict[str, float] = {}
    if best_epoch is not None:
        marks[f"best (epoch {best_epoch:.0f})"] = best_epoch
    if stopped_epoch is not None:
        marks[f"early stop (epoch {stopped_epoch})"] = stopped_epoch
    return marks


def curve_figure(
    history: Sequence[Row],
    title: str,
    ylabel: str,
    metrics: Sequence[str],
    marks: dict[str, float] | None = None,
) -> Figure:
    figure = Figure(figsize=(6, 4), layout="constrained")
    axes = figure.add_subplot()
    for metric in metrics:
        points = [(row["epoch"], row[metric]) for row in history if metric in row]
        if points:
            epochs, values = zip(*points, strict=True)
            axes.plot(epochs, values, marker="o", markersize=3, label=metric)
    for (label, epoch), style in zip((marks or {}).items(), (":", "--"), strict=False):
        axes.axvline(epoch, color="grey", linestyle=style, linewidth=1, label=label)
    axes.set(title=title, xlabel="epoch", ylabel=ylabel)
    axes.grid(alpha=0.3)
    axes.legend()
    return figure


def confusion_figure(matrix: Tensor, class_names: Sequence[object] | None = None) -> Figure:
    """Counts of true class (rows) against predicted class (columns), with the numbers;
    the title gives both accuracies as metrics.json names them."""
    counts = matrix.cpu().numpy()
    classes = range(len(counts))
    names = [inert(name) for name in (class_names or classes)]  # control codes shown escaped
    figure = Figure(figsize=(6, 5.5), layout="constrained")
    axes = figure.add_subplot()
    image = axes.imshow(counts, cmap="Blues")
    figure.colorbar(image, ax=axes)
    threshold = counts.max() / 2
    for row in classes:
        for col in classes:
            colour = "white" if counts[row, col] > threshold else "black"
            axes.text(col, row, str(int(counts[row, col])), ha="center", va="center", color=colour)
    figures = accuracies(matrix.cpu())
    axes.set(
        title=(
            f"Confusion matrix, test split\nacc {float(figures['acc']):.4f}, "
            f"balanced_acc {float(figures['balanced_acc']):.4f}"
        ),
        xlabel="predicted class",
        ylabel="true class",
        xticks=list(classes),
        yticks=list(classes),
    )
    rotation = 45 if max(map(len, names), default=0) > 3 else 0
    # Names from a file are plain text: "$x_{1$" is not mathtext, "$100-$200" not a formula.
    axes.set_xticklabels(names, rotation=rotation, parse_math=False)
    axes.set_yticklabels(names, parse_math=False)
    return figure


def per_class_figure(matrix: Tensor, class_names: Sequence[object]) -> Figure:
    """Precision and recall of each class on the test split, its support in the label."""
    table = per_class(matrix, [inert(name) for name in class_names])
    labels = [f"{name} (n={row['support']})" for name, row in table.items()]
    rows = range(len(labels))
    height = 0.4
    figure = Figure(figsize=(6, max(3.0, 0.35 * len(labels) + 1.2)), layout="constrained")
    axes = figure.add_subplot()
    for offset, key in ((-height / 2, "precision"), (height / 2, "recall")):
        values = [float(row[key]) for row in table.values()]
        axes.barh([r + offset for r in rows], values, height=height, label=key)
    axes.set(
        title="Per class, test split",
        xlabel="precision, recall",
        xlim=(0, 1),
        yticks=list(rows),
    )
    axes.set_yticklabels(labels, parse_math=False)
    axes.invert_yaxis()  # the first class on top
    axes.grid(axis="x", alpha=0.3)
    figure.legend(loc="outside lower center", ncol=2)
    return figure


def save(figure: Figure, path: Path) -> Path:
    write_atomic(path, lambda tmp: figure.savefig(tmp, format="png", dpi=100))
    return path
