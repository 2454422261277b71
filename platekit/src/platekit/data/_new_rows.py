"""Evaluate every row of new data on purpose: eval's ``new_data=true``.

The rows are read as predict reads them, with the checkpoint's own encoding (its columns'
fills, categories and scales, its image size and channels): nothing is split and nothing is
learnt from them, so the figures equal predict's answers on the same rows. These are not
the training run's test rows, and eval says so.

A CSV table (``data.path=``, its target column named as in training) or an image folder
(``data.root=``, one subfolder per class the model knows).
"""

import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch
from lightning import LightningDataModule
from torch.utils.data import DataLoader, TensorDataset

from platekit._errors import UserError
from platekit.data._cells import GROUPED, PLAIN, infer_format, parse
from platekit.data._columns import Texts, read_columns, text_load
from platekit.data._encoding import encode, text_columns
from platekit.data._info import DataInfo
from platekit.data._inputs import read_inputs, table_array
from platekit.data._memory import READER, check_memory, out_of_memory
from platekit.data._tables import column_index, read_header, read_table

log = logging.getLogger(__name__)


class NewRows(LightningDataModule):
    """Every row of ``settings``' table or image folder as one test split."""

    def __init__(
        self,
        settings: dict[str, Any],
        info: DataInfo,
        normalization: tuple[torch.Tensor, torch.Tensor],
        batch_size: int = 512,
    ) -> None:
        super().__init__()
        self.info = info
        self.class_names = info.class_names
        inputs, targets, source = labelled_rows(settings, info)
        mean, std = normalization
        normalised = (torch.from_numpy(inputs) - mean) / std
        self.rows = TensorDataset(normalised.float(), targets)
        self.batch_size = batch_size
        log.warning(
            "new_data=true: evaluating all %d rows of %s as new data, encoded as the "
            "checkpoint's training encoded its own (nothing re-split or re-learnt); these are "
            "not the training run's test rows",
            len(targets),
            source,
        )

    def test_dataloader(self) -> DataLoader[Any]:
        return DataLoader(self.rows, batch_size=self.batch_size, shuffle=False)


def labelled_rows(settings: dict[str, Any], info: DataInfo) -> tuple[np.ndarray, torch.Tensor, str]:
    """Raw inputs (as predict reads them), targets, and the source's name."""
    if settings.get("path") and info.feature_names:
        path = Path(str(settings["path"]))
        name = str(settings.get("target", "target"))
        if not info.table_columns:  # a checkpoint from before columns were typed: plain numbers
            header, rows = read_table(path)
            inputs = table_array(header, rows, info, path)
            cells = [row[column_index(path, header, [name])[name]].strip() for row in rows]
            return inputs, targets_of(cells, info, f"{path} column '{name}'"), str(path)
        header = read_header(path)
        names = [column["name"] for column in info.table_columns]
        missing = [column for column in [*names, name] if column not in header]
        if missing:
            raise UserError(
                f"{path} lacks the column(s) {', '.join(missing)}; new_data=true needs the "
                f"model's columns ({', '.join(names)}) and the target column (data.target)"
            )
        column_index(path, header, [*names, name])
        texts = [name, *text_columns(info.table_columns)]
        check_memory(path, READER + text_load(path, header, [*names, name], texts))
        try:
            columns = read_columns(path, header, [*names, name], texts)
        except MemoryError:
            raise out_of_memory(path) from None
        target = columns.pop(name)
        assert isinstance(target, Texts)
        inputs = encode(info.table_columns, columns, path).reshape(len(target), *info.input_shape)
        per_text = targets_of(target.texts, info, f"{path} column '{name}'")
        return inputs, per_text[torch.from_numpy(target.codes).long()], str(path)
    if settings.get("root") and len(info.input_shape) == 3:
        root = Path(str(settings["root"]))
        folders = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        if not folders:
            raise UserError(f"data.root '{root}' holds no class folders; pass the image folder")
        arrays, labels = [], []
        for folder in folders:
            array, _ = read_inputs([folder], info)
            arrays.append(array)
            labels += [folder.name] * len(array)
        inputs = np.concatenate(arrays)
        return inputs, targets_of(labels, info, f"{root}'s class folders"), str(root)
    raise UserError(
        "new_data=true evaluates a CSV table (data.path=...) or an image folder "
        "(data.root=...) of rows with their targets; name one"
    )


def targets_of(cells: list[str], info: DataInfo, source: str) -> torch.Tensor:
    """Class indices by the checkpoint's class names, or float values (read as training
    reads a target: plain, or thousands grouped by threes)."""
    if info.target_kind != "class":
        fmt, _ = infer_format(cells)
        values = [parse(cell.strip(), fmt if fmt in (PLAIN, GROUPED) else PLAIN) for cell in cells]
        bad = next((cell for cell, value in zip(cells, values, strict=True) if value is None), None)
        if bad is not None:
            raise UserError(f"{source} holds {bad!r}, not a number; give numeric targets")
        return torch.tensor(values, dtype=torch.float32)
    index = {name: i for i, name in enumerate(info.class_names)}
    unknown = sorted({cell for cell in cells if cell not in index})
    if unknown:
        raise UserError(
            f"{source} holds {len(unknown)} class(es) the model does not know "
            f"({', '.join(map(repr, unknown[:3]))}); it knows {list(info.class_names)[:10]}"
        )
    return torch.tensor([index[cell] for cell in cells], dtype=torch.int64)
