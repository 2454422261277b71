"""Build the configured model for the data at hand: sizes from the data, checked before training.

A model config names the net's own choices; the data gives its sizes. Every net argument
the data decides (``input_shape``, ``num_outputs``) and the task's ``num_classes`` are
filled in here, and a net that still does not fit (a fixed size of its own, a layer
expecting other inputs) is refused before training, in one line naming both sizes.
"""

import inspect
from typing import Any

import torch
from hydra.utils import get_class, instantiate
from lightning import LightningModule
from lightning.pytorch.utilities.seed import isolate_rng
from torch import nn

from ..cli.errors import UserError, first_line
from ..data.info import DataInfo
from ..runtime.config import to_plain

FROM_DATA = ("input_shape", "num_outputs")


def build_model(model_cfg: Any, info: DataInfo, *, compile: bool = False) -> LightningModule:
    """The LightningModule of ``model_cfg`` sized for ``info``'s data."""
    node: dict[str, Any] = to_plain(model_cfg)
    node["net"] = sized_net(node["net"], info)
    model_class = get_class(node["_target_"])
    if "num_classes" in inspect.signature(model_class).parameters:
        node["num_classes"] = task_classes(node.get("num_classes"), info)
    check_net_fits(node["net"], info)
    extra = {"compile": compile} if compile else {}
    return instantiate(node, _recursive_=False, **extra)


def sized_net(net: dict[str, Any], info: DataInfo) -> dict[str, Any]:
    """``net`` with the sizes the data decides filled in (and checked where the config set them)."""
    accepts = inspect.signature(get_class(net["_target_"])).parameters
    sizes = {"input_shape": list(info.input_shape), "num_outputs": info.num_outputs}
    net = dict(net)
    for name in FROM_DATA:
        if name not in accepts:
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
    if info.target_kind != "class":
        raise UserError(
            "the data has a real-valued target (a regression), but the model is a classifier; "
            "use a regression model, or data.target_kind=class if the values are classes"
        )
    assert info.num_classes is not None
    if given is not None and given != info.num_classes:
        names = ", ".join(info.class_names[:10]) + (" ..." if info.num_classes > 10 else "")
        raise UserError(
            f"model.num_classes={given} but the data has {info.num_classes} classes "
            f"({names}); remove model.num_classes: it follows the data"
        )
    return info.num_classes


def check_net_fits(net_cfg: dict[str, Any], info: DataInfo) -> None:
    """Run a throwaway net on two zero inputs; refuse it if it fails or outputs another size."""
    target = net_cfg["_target_"].rsplit(".", 1)[-1]
    shape = tuple(info.input_shape)
    with isolate_rng(), torch.no_grad():  # the throwaway must not shift the seeded run
        net: nn.Module = instantiate(net_cfg)
        net.eval()
        try:
            outputs = net(torch.zeros(2, *shape))
        except Exception as error:  # whatever the net raises, the fix is the same
            raise UserError(
                f"model.net {target} cannot take the data's inputs of shape {shape} "
                f"({first_line(error)}); pick a net for this data (e.g. model=mlp for a "
                "table) or change its settings"
            ) from error
    want = info.num_outputs
    got = tuple(outputs.shape[1:]) if isinstance(outputs, torch.Tensor) else None
    if got != (want,):
        what = f"{want} classes" if info.target_kind == "class" else "1 value"
        raise UserError(
            f"model.net {target} outputs {got} values per input, but the data needs {what}; "
            "let its output size follow the data (a num_outputs argument) or fix it"
        )
