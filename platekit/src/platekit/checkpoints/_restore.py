"""Open a training checkpoint and rebuild what it describes: its model and its data.

The one way eval, export and predict open a checkpoint::

    checkpoint = Checkpoint.open(path)
    model = checkpoint.model()                       # weights loaded, eval mode
    datamodule = checkpoint.datamodule(overrides)    # the run's own data and split

What a checkpoint can and cannot make this project do (the promise):

- Loading it runs no code of its choosing. Its tensors are read with ``weights_only=True``;
  every class it names (model, net and anything nested in the net's arguments, task,
  optimizer, schedule, data module) is resolved by ``registry.py``: a class statement
  under this project's package, ``torch.nn`` or ``torch.optim`` (or a class named exactly
  in ``trusted_classes``), of the right base for its slot, found before anything is
  imported. Its strings are plain values, never OmegaConf interpolations.
- Its data paths resolve against the project root, never the working directory. Sealed by
  this project's key (``seal.py``), it follows them anywhere; otherwise it reads no data path
  outside the project: the data is named again (``data.path=...``).
- Its data must be the rows it was trained on (a fingerprint per split): eval and resume
  refuse other rows in one line, unless asked to evaluate new rows (``new_data=true``).
- It still chooses the arguments of those classes (sizes, learning rates, a CSV column):
  a file from someone you do not trust can make a model that predicts nonsense, or a
  data module that reads a table of this project's. Its checksum detects corruption, not
  tampering: anyone can recompute it.
"""

import contextlib
import logging
import site
import sysconfig
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from lightning import LightningDataModule, LightningModule

from platekit._errors import UserError, first_line
from platekit._project import current
from platekit._registry import Registry, active
from platekit.checkpoints._card import DATA_KEY, MODEL_KEY
from platekit.checkpoints._integrity import SEALED
from platekit.checkpoints._io import load_checkpoint, load_weights
from platekit.data._info import DataInfo

log = logging.getLogger(__name__)


@dataclass
class Checkpoint:
    """A verified checkpoint and what it says about itself."""

    path: Path
    content: dict[str, Any]
    registry: Registry

    @classmethod
    def open(cls, path: str | Path, registry: Registry | None = None) -> "Checkpoint":
        """Load (weights only, verified); check it describes its data and model, and that
        every class it names is one the registry may build (nothing is built yet)."""
        content = load_checkpoint(path)
        checkpoint = cls(Path(path), content, registry or active())
        if DATA_KEY not in content or MODEL_KEY not in content:
            raise UserError(
                f"checkpoint '{path}' does not describe its data and model (it was not "
                "written by this project's train, or by an older version); retrain, or "
                "load its weights with init_from="
            )
        check_names(content, checkpoint.registry, path)
        check_card(content[DATA_KEY], path)
        return checkpoint

    @property
    def info(self) -> DataInfo:
        return DataInfo.from_dict(self.content[DATA_KEY]["info"], f"checkpoint '{self.path}'")

    @property
    def normalization(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The train split's mean and std the model was trained behind (identity if none)."""
        card = self.content[DATA_KEY]
        return card.get("mean", torch.zeros(())), card.get("std", torch.ones(()))

    @property
    def data_settings(self) -> dict[str, Any]:
        return dict(self.content[DATA_KEY].get("args", {}))

    def model(self) -> LightningModule:
        """The LightningModule rebuilt from the checkpoint's hyperparameters, weights loaded."""
        target = self.content[MODEL_KEY]["_target_"]
        model_class = self.registry.resolve(target, "model", f"checkpoint '{self.path}' model")
        settings = dict(self.content.get("hyper_parameters", {}))
        settings.pop("compile", None)  # how a command runs is not the checkpoint's to decide
        check_size(model_class, settings, self.content.get("state_dict", {}), self.path)
        try:
            model = model_class(**settings)
        except UserError:
            raise
        except Exception as error:  # what a foreign constructor raises is not ours to type
            raise UserError(
                f"checkpoint '{self.path}' cannot rebuild its model {target} "
                f"({first_line(error)}); pass a checkpoint written by this project's train"
            ) from error
        load_weights(model, self.content, self.path)
        return model.eval()

    @property
    def sealed(self) -> bool:
        """Whether this project's key sealed it (``seal.py``): then it follows its own data
        paths from anywhere, and a resume keeps its run settings."""
        return bool(self.content.get(SEALED))

    def table_path(self, overrides: Mapping[str, Any] | None = None) -> Path | None:
        """The CSV file a table checkpoint (``CsvDataModule`` with ``data.path``) was trained
        on, resolved as :meth:`datamodule` resolves it (``overrides`` win); None otherwise."""
        from platekit.data._csv import CsvDataModule

        target = self.content[DATA_KEY].get("_target_")
        data_class = self.registry.resolve(target, "data", f"checkpoint '{self.path}' data")
        if not (isinstance(data_class, type) and issubclass(data_class, CsvDataModule)):
            return None
        given = dict(overrides or {})
        settings = data_paths({**self.data_settings, **given}, given, self.path, self.sealed)
        return Path(settings["path"]) if settings.get("path") else None

    def datamodule(
        self,
        overrides: Mapping[str, Any] | None = None,
        *,
        check: Iterable[str] = ("test",),
        refuse: bool = True,
        new_rows: bool = False,
    ) -> LightningDataModule:
        """The run's data module, set up, with its stored settings (``overrides`` win, warned).

        Args:
            overrides: ``data.<setting>=`` values given by the user.
            check: the splits whose rows must be the checkpoint's own (``check_rows``).
            refuse: False: say when they are not, instead of refusing (export's parity).
            new_rows: every row of the data as one test split, encoded with the
                checkpoint's encoding (``data/_new_rows.py``): new data, on purpose.
        """
        card = self.content[DATA_KEY]
        settings = self.data_settings
        for name in HOW_TO_RUN:  # this process decides these, not the checkpoint
            settings.pop(name, None)
        given = dict(overrides or {})
        for key, value in given.items():
            if settings.get(key) != value:
                log.warning(
                    "data.%s=%s overrides the checkpoint's %s", key, value, settings.get(key)
                )
            settings[key] = value
        settings = data_paths(settings, given, self.path, self.sealed)
        if new_rows:
            from platekit.data._new_rows import NewRows

            return NewRows(settings, self.info, self.normalization)
        try:
            datamodule = self.registry.build(
                {"_target_": card["_target_"], **settings}, "data", "data"
            )
        except UserError:
            raise
        except Exception as error:
            raise UserError(
                f"checkpoint '{self.path}' cannot rebuild its data module {card['_target_']} "
                f"({first_line(error)}); pass data.<setting>=... to fix the stored settings"
            ) from error
        mean, std = self.normalization
        if hasattr(datamodule, "use_statistics") and "mean" in card:  # the trained model's scale
            datamodule.use_statistics(mean, std)
        if hasattr(datamodule, "use_columns") and self.info.table_columns:  # its column types
            datamodule.use_columns(self.info.table_columns)
        try:
            datamodule.prepare_data()
            datamodule.setup("test")
        except UserError as error:
            stored = {k: v for k, v in card.get("args", {}).items() if k in ("path", "root")}
            raise UserError(
                f"the checkpoint's data ({stored or card['_target_']}) cannot be read: {error}; "
                "if it moved, pass its new place, e.g. data.path=... or data.root=..."
            ) from error
        except Exception as error:  # a data module the checkpoint names, failing its own way
            raise UserError(
                f"checkpoint '{self.path}' names the data module {card['_target_']}, which "
                f"failed to set up ({type(error).__name__}: {first_line(error)}); pass "
                "data.<setting>=... to fix the stored settings, or a checkpoint of this project"
            ) from error
        check_same_data(self.info, datamodule, self.path)
        try:
            check_rows(card, datamodule, check, self.path)
        except UserError as error:
            if refuse:
                raise
            log.warning("%s", str(error).split("; ")[0] + "; parity is checked on them anyway")
        return datamodule


SAME_DATA = ("input_shape", "target_kind", "class_names", "feature_names")
NEW_DATA_FIX = (
    "pass the data it was trained on (data.path=...), or evaluate this data as new rows on "
    "purpose with new_data=true"
)


def check_rows(
    card: Mapping[str, Any],
    datamodule: LightningDataModule,
    splits: Iterable[str],
    path: str | Path,
) -> None:
    """Refuse splits whose rows are not those the checkpoint was trained on (added, removed,
    reordered or edited rows, a replaced file): its figures would be of other rows.

    A checkpoint that records no fingerprints (platekit < 0.3), or a data module that is not
    a ``BaseDataModule``, cannot be checked: one line says so.
    """
    from platekit.data._adapters import FINGERPRINTS_KEY, is_contract
    from platekit.data._base import ALL, BaseDataModule
    from platekit.data._fingerprint import difference, is_fingerprint

    if not is_contract(datamodule):
        log.warning(
            "data module %s is a plain LightningDataModule: whether its rows are those "
            "checkpoint '%s' was trained on cannot be checked",
            type(datamodule).__name__,
            path,
        )
        return
    stored = card.get(FINGERPRINTS_KEY)
    if not isinstance(stored, Mapping):
        log.warning(
            "checkpoint '%s' records no fingerprint of its data (platekit < 0.3): whether "
            "these are the rows it was trained on cannot be checked",
            path,
        )
        return
    assert isinstance(datamodule, BaseDataModule)  # is_contract
    for split in splits:
        if not is_fingerprint(stored.get(split)):
            continue
        changed = difference(stored[split], datamodule.fingerprint(split))
        if changed is None:
            continue
        if is_fingerprint(stored.get(ALL)) and changed.endswith("content differs"):
            whole = difference(stored[ALL], datamodule.fingerprint(ALL))
            if whole is not None and whole.endswith("in another order"):
                changed += " (the data holds the same rows in another order: the split differs)"
        raise UserError(
            f"the {split} split is not the one checkpoint '{path}' was trained on: "
            f"{changed}; {NEW_DATA_FIX}"
        )


def check_same_data(stored: DataInfo, datamodule: LightningDataModule, path: str | Path) -> None:
    """Refuse data that no longer reads as the checkpoint's: another file behind its path
    with other classes, columns or category values would give silently wrong figures."""
    from platekit.data._adapters import is_contract  # the data package imports the registry

    if not is_contract(datamodule):
        return
    rebuilt = datamodule.info
    for name in SAME_DATA:
        old, new = getattr(stored, name), getattr(rebuilt, name)
        if old == new:
            continue
        if isinstance(old, tuple) and isinstance(new, tuple) and name != "input_shape":
            added, gone = sorted(set(new) - set(old)), sorted(set(old) - set(new))
            detail = f"new {added[:3]}, gone {gone[:3]}" if added or gone else "another order"
        else:
            detail = f"{new} instead of {old}"
        raise UserError(
            f"the data no longer reads as checkpoint '{path}' was trained on: its "
            f"{name.replace('_', ' ')} differ ({detail}); pass the data the model was "
            "trained on (data.path=...), or retrain"
        )


def check_names(content: Mapping[str, Any], registry: Registry, path: str | Path) -> None:
    """Resolve every class the checkpoint names (model, its parts, data); build nothing."""
    where = f"checkpoint '{path}'"
    registry.resolve(content[MODEL_KEY].get("_target_"), "model", f"{where} model")
    registry.check_model(content.get("hyper_parameters") or {}, f"{where} model")
    card = content[DATA_KEY]
    registry.resolve(card.get("_target_"), "data", f"{where} data")
    registry.check(card.get("args") or {}, "part", f"{where} data")


def check_card(card: Mapping[str, Any], path: str | Path) -> None:
    """Refuse a data card whose metadata or statistics would make silent wrong answers.

    A NaN mean or a zero std predicts NaN for every row; a mean of the wrong shape fails
    far from its cause. Checked like the weights: finite, std > 0, shapes that broadcast
    over one input, one class name per output.
    """
    where = f"checkpoint '{path}'"
    fix = "; use another checkpoint, or retrain"
    if not isinstance(card.get("info"), Mapping):
        raise UserError(f"{where} has no data description (data.info){fix}")
    try:
        info = DataInfo.from_dict(dict(card["info"]), where)
    except (ValueError, TypeError) as error:
        raise UserError(f"{first_line(error)}{fix}") from None
    for name in ("mean", "std"):
        value = card.get(name)
        if value is None:
            continue
        if not isinstance(value, torch.Tensor) or not value.is_floating_point():
            raise UserError(f"{where}: data.{name} is not a float tensor{fix}")
        if not torch.isfinite(value).all():
            raise UserError(f"{where}: data.{name} holds NaN or Inf{fix}")
        try:
            torch.broadcast_shapes(tuple(value.shape), (1, *info.input_shape))
        except RuntimeError:
            raise UserError(
                f"{where}: data.{name} of shape {tuple(value.shape)} does not fit inputs of "
                f"shape {info.input_shape}{fix}"
            ) from None
        if name == "std" and not bool((value > 0).all()):
            raise UserError(f"{where}: data.std holds values <= 0 (inputs would divide by 0){fix}")


PATH_SETTINGS = ("path", "root")
# Data settings that say how this process runs, not what the data is: never a checkpoint's.
HOW_TO_RUN = ("num_workers", "persistent_workers", "pin_memory", "prefetch_factor")
PATH_SUFFIXES = ("_dir", "_path", "_file", "_root")


def is_path_setting(name: str) -> bool:
    return name in PATH_SETTINGS or name.endswith(PATH_SUFFIXES)


def data_paths(
    settings: Mapping[str, Any], given: Mapping[str, Any], source: str | Path, sealed: bool
) -> dict[str, Any]:
    """``settings`` with each stored data path resolved against the project root (never the
    working directory); a path outside the project is refused unless the checkpoint is
    sealed by this project (``seal.py``) or the user named it again."""
    root = current().root
    resolved = dict(settings)
    for name, value in settings.items():
        if name in given or not is_path_setting(name) or not isinstance(value, str) or not value:
            continue
        place = (Path(value) if Path(value).is_absolute() else root / value).resolve()
        if not sealed and not (place == root or root in place.parents):
            raise UserError(
                f"checkpoint '{source}' is not sealed by this project (a teammate's, CI's, "
                f"an older version's or a file from elsewhere) and stores data.{name} outside "
                f"this project, which such a checkpoint may not read; name the data again, "
                f"e.g. data.{name}=/path/to/it"
            )
        code = code_place(place)
        if code is not None:
            raise UserError(
                f"checkpoint '{source}' stores data.{name}={value}, inside {code}, where this "
                f"project reads or writes no data; name the data again, e.g. data.{name}=data"
            )
        resolved[name] = str(place)
    return resolved


def code_place(place: Path) -> str | None:
    """What code ``place`` lies in (the project's source tree, the installed packages, this
    Python), where a data module rebuilt from a checkpoint may not write; None if none."""
    places = {current().root / "src": "the project's source tree"}
    installed = (*site.getsitepackages(), site.getusersitepackages(), sysconfig.get_path("stdlib"))
    for packages in installed:
        places[Path(packages)] = "the installed packages"
    places[Path(__file__).resolve().parents[1]] = "platekit's own folder"
    for folder, name in places.items():
        with contextlib.suppress(OSError):
            real = folder.resolve()
            if place == real or real in place.parents:
                return f"{name} ({real})"
    return None


def check_size(
    model_class: Any, settings: dict[str, Any], state: Mapping[str, Any], path: str | Path
) -> None:
    """Refuse, before any memory is taken, a model the checkpoint's settings make larger than
    its weights: built first on the meta device (shapes, no storage), its values counted.

    A 387 KB checkpoint whose settings asked for a ``Linear(30000, 30000)`` made every
    command allocate 3.6 GB before the weights were compared. A class that cannot be built
    on the meta device is built as before (the weights are then compared key by key).
    """
    stored = sum(value.numel() for value in state.values() if isinstance(value, torch.Tensor))
    try:
        with torch.device("meta"):
            probe = model_class(**settings)
    except Exception:  # e.g. a constructor that reads a tensor's value: no shapes to count
        return
    needed = sum(value.numel() for value in probe.state_dict().values())
    if needed > stored:
        raise UserError(
            f"checkpoint '{path}': its settings build a model of {needed} values, its weights "
            f"hold {stored}; pass a checkpoint written by this project's train"
        )
