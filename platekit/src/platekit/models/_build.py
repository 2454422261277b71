"""Build the configured model for the data at hand: sizes from the data, checked before training.

A model config names the net's own choices; the data gives its sizes and its task (class
targets: a classification, real values: a regression, ``tasks.py``). Every net argument
the data decides (``input_shape``, ``num_outputs``) and the task's sizes are filled in
here, and a net that still does not fit (a fixed size of its own, a layer expecting other
inputs) is refused before training, in one line naming both sizes.
"""

import inspect
from typing import Any

import torch
from lightning import LightningModule
from lightning.pytorch.utilities.seed import isolate_rng
from torch import Tensor, nn

from platekit._errors import UserError, first_line
from platekit._files import format_bytes
from platekit._registry import active
from platekit.config._nodes import to_plain
from platekit.data._info import DataInfo
from platekit.data._memory import in_processes, shortfall
from platekit.models._tasks import BALANCED, TASKS, balanced_class_weights

FROM_DATA = ("input_shape", "num_outputs", "vocab_size", "padding_value")


def build_model(
    model_cfg: Any,
    info: DataInfo,
    *,
    optimizer: Any = None,
    scheduler: Any = None,
    target_stats: dict[str, float] | None = None,
    train_targets: Tensor | None = None,
    compile: bool = False,
) -> LightningModule:
    """The LightningModule of ``model_cfg`` sized for ``info``'s data, learning its task.

    Args:
        optimizer, scheduler: the ``optimizer`` and ``scheduler`` groups' configs.
        target_stats: the train split's target mean and std (a regression's scale).
        train_targets: the train split's class targets, for ``class_weights: balanced``.
    """
    node: dict[str, Any] = to_plain(model_cfg)
    refuse_moved_keys(node)
    node["net"] = sized_net(node["net"], info)
    model_class = active().resolve(node.get("_target_"), "model", "model")
    accepts = inspect.signature(model_class).parameters
    if "task" in accepts:
        node["task"] = task_for(node.get("task"), info, target_stats or {}, train_targets)
    for name, value in (("optimizer", optimizer), ("scheduler", scheduler)):
        if name in accepts and value is not None:
            node[name] = to_plain(value)
    check_net_fits(node["net"], info)
    active().check_model(node)
    arguments = {key: value for key, value in node.items() if key != "_target_"}
    extra = {"compile": compile} if compile else {}
    return model_class(**arguments, **extra)


def refuse_moved_keys(node: dict[str, Any]) -> None:
    """A model config from before the optimizer and scheduler groups: name the new keys."""
    for name in ("optimizer", "scheduler", "num_classes"):
        if name in node:
            where = "model.task.num_classes" if name == "num_classes" else f"the {name} group"
            raise UserError(
                f"model.{name} has moved to {where}; remove it from the model config and set "
                f"e.g. {'optimizer.lr=0.001' if name == 'optimizer' else name + '=...'} instead "
                "(see README: 'Optimizer and schedule')"
            )


def task_for(
    given: dict[str, Any] | None,
    info: DataInfo,
    target_stats: dict[str, float],
    train_targets: Tensor | None = None,
) -> dict[str, Any]:
    """The task config: the data's kind of target decides it unless the model config names one.

    A classification gets the data's number of classes (and ``class_weights: balanced``
    the weights of the train split's class counts), a regression the train split's target
    scale; a task that does not fit the data's targets is refused. Settings left ``null``
    (``monitor``, ``class_weights``) take the task's defaults.
    """
    default = f"platekit.models.{TASKS[info.target_kind].__qualname__}"  # its public name
    settings = {key: value for key, value in (given or {}).items() if value is not None}
    task = {"_target_": default, **settings}
    task_class = active().resolve(task["_target_"], "task", "model.task")
    kind = getattr(task_class, "target_kind", None)
    if kind is not None and kind != info.target_kind:
        what = (
            "real-valued targets (a regression)" if info.target_kind == "value" else "class targets"
        )
        raise UserError(
            f"model.task is {task_class.__name__}, but the data has {what}; leave model.task "
            "unset (it follows the data), or set data.target_kind to match"
        )
    if kind == "class":
        task["num_classes"] = task_classes(task.get("num_classes"), info)
        if task.get("class_weights") == BALANCED and train_targets is not None:
            task["class_weights"] = balanced_class_weights(train_targets, task["num_classes"])
    elif kind == "value":
        task = {**task, **target_stats}
    accepts = inspect.signature(task_class).parameters
    unknown = [key for key in task if key != "_target_" and key not in accepts]
    if unknown and not any(p.kind is p.VAR_KEYWORD for p in accepts.values()):
        raise UserError(
            f"model.task.{unknown[0]} is not a setting of {task_class.__name__}; its settings "
            f"are {[name for name in accepts if name not in ('self',)]}"
        )
    return task


def sized_net(net: dict[str, Any], info: DataInfo) -> dict[str, Any]:
    """``net`` with the sizes the data decides filled in (and checked where the config set them)."""
    accepts = inspect.signature(
        active().resolve(net.get("_target_"), "net", "model.net")
    ).parameters
    sizes = {
        "input_shape": list(info.input_shape),
        "num_outputs": info.num_outputs,
        "vocab_size": info.vocab_size,  # token inputs
        "padding_value": info.padding_value,  # variable-length inputs
    }
    net = dict(net)
    for name in FROM_DATA:
        if name not in accepts or sizes[name] is None:
            continue
        given = net.get(name)
        if given is not None and as_list(given) != as_list(sizes[name]):
            raise UserError(
                f"model.net.{name}={given} does not fit the data, whose {name} is "
                f"{sizes[name]}; remove model.net.{name}: it follows the data"
            )
        net[name] = sizes[name]
    return net


def as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


def task_classes(given: int | None, info: DataInfo) -> int:
    """The number of classes the task scores: the data's; a different configured one is refused."""
    assert info.num_classes is not None
    if given is not None and given != info.num_classes:
        names = ", ".join(info.class_names[:10]) + (" ..." if info.num_classes > 10 else "")
        raise UserError(
            f"model.task.num_classes={given} but the data has {info.num_classes} classes "
            f"({names}); remove model.task.num_classes: it follows the data"
        )
    return info.num_classes


TRAINING_BYTES = 16  # per float32 parameter while training: weight, gradient, two Adam moments


def check_net_memory(net_cfg: dict[str, Any], target: str) -> None:
    """Refuse a net whose settings ask for more memory than this process may use, counted on
    the meta device (shapes only) before any is taken: ``model.net.channels=[20000,20000]``
    allocated 14.4 GB before it failed. A net that cannot be built on the meta device (its
    constructor reads a tensor's value) is built as before."""
    try:
        with isolate_rng(), torch.device("meta"):
            probe = active().build(net_cfg, "net", "model.net")
    except UserError:
        raise
    except Exception:
        return  # the real build below says what is wrong, if anything
    values = sum(value.numel() for value in probe.state_dict().values())
    need = values * TRAINING_BYTES
    short = shortfall(need)
    if short is not None:
        raise UserError(
            f"model.net {target} holds {values:,} values: training it needs about "
            f"{format_bytes(need)}{in_processes(need)} (weights, gradients, optimizer state), "
            f"but {short}; make it smaller with model.net.<setting>=..."
        )


def check_net_fits(net_cfg: dict[str, Any], info: DataInfo) -> None:
    """Run a throwaway net on two zero inputs; refuse it if it fails or outputs another size."""
    target = net_cfg["_target_"].rsplit(".", 1)[-1]
    shape = tuple(info.input_shape)
    check_net_memory(net_cfg, target)
    with isolate_rng(), torch.no_grad():  # the throwaway must not shift the seeded run
        try:
            net: nn.Module = active().build(net_cfg, "net", "model.net")
        except UserError:
            raise
        except Exception as error:  # a setting of the wrong type or value (from a YAML or
            raise UserError(  # a resumed checkpoint): the fix is the setting
                f"model.net {target} cannot be built from its settings "
                f"({type(error).__name__}: {first_line(error)}); fix model.net.<setting>=... "
                "(a resumed run takes them from its checkpoint)"
            ) from error
        net.eval()
        try:
            outputs = net(torch.zeros(2, *shape))
        except Exception as error:  # whatever the net raises, the fix is the same
            raise UserError(
                f"model.net {target} cannot take the data's inputs of shape {shape} "
                f"({first_line(error)}); pick a net for this data (e.g. model=mlp for a "
                "table) or change its settings"
            ) from error
    if info.varying_axis is not None:
        check_other_lengths(net, target, info)
    want = info.num_outputs
    if not isinstance(outputs, torch.Tensor):
        kind = type(outputs).__name__
        count = f" of {len(outputs)} values" if isinstance(outputs, tuple | list | dict) else ""
        raise UserError(
            f"model.net {target} returns a {kind}{count}, not one tensor of shape (batch, "
            f"{want}); return the output tensor only (e.g. the logits)"
        )
    got = tuple(outputs.shape[1:])
    if got != (want,):
        what = f"{want} classes" if info.target_kind == "class" else "1 value"
        raise UserError(
            f"model.net {target} outputs {got} values per input, but the data needs {what}; "
            "let its output size follow the data (a num_outputs argument) or fix it"
        )


def check_other_lengths(net: nn.Module, target: str, info: DataInfo) -> None:
    """Variable-length data: the net must take a shorter length too (a sequence net does,
    an MLP over the padded length does not), or export and predict could not."""
    assert info.varying_axis is not None
    shape = list(info.input_shape)
    shape[info.varying_axis] = max(1, shape[info.varying_axis] // 2)
    padding = info.padding_value or 0.0
    with isolate_rng(), torch.no_grad():
        try:
            net(torch.full((2, *shape), padding))
        except Exception as error:  # whatever the net raises, the fix is the same
            raise UserError(
                f"model.net {target} takes inputs of length {info.input_shape[info.varying_axis]}"
                f" only, but the data's length varies (axis {info.varying_axis}: "
                f"{first_line(error)}); pick a sequence net (e.g. model=gru)"
            ) from error
