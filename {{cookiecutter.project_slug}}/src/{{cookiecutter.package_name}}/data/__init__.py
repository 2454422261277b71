"""Data modules and the pieces they are made of."""

from .digits import DigitsDataModule

__all__ = ["DigitsDataModule"]
