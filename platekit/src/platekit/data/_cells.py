"""What a table's cell means: the one parser of train, resume, eval, predict and serve.

A number column has a format, decided from every cell of the column (evidence, not guesses):

- ``plain``: what ``float`` reads (``2500``, ``-1.5e3``);
- ``grouped``: thousands separators, only when every value groups its digits by threes
  (``1,234,567.89``, ``-2,500``; ``500`` too); ``1,5`` could be a decimal comma and is refused;
- ``date``: ISO dates and datetimes (``2026-12-01``, ``2026-12-01T08:30:00Z``), read as days
  since 1970-01-01 (UTC; a time is a fraction of a day), so they keep their order;
- ``bool``: yes/no spellings in any case (``yes``/``No``/``TRUE``/``0``/``Y``), read as 1/0.

A checkpoint from before formats existed reads every number column as ``plain``.
"""

import re
from collections.abc import Iterable
from datetime import UTC, datetime

PLAIN, GROUPED, DATE, BOOL = "plain", "grouped", "date", "bool"
FORMATS = (PLAIN, GROUPED, DATE, BOOL)
GAPS = frozenset({"", "na", "nan", "n/a", "null", "none", "?"})
TRUE = frozenset({"true", "yes", "y", "t", "1"})
FALSE = frozenset({"false", "no", "n", "f", "0"})
UNIT = {DATE: "days since 1970-01-01", BOOL: "1 = yes/true, 0 = no/false"}

_GROUPED = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_SHORT = re.compile(r"[+-]?\d{1,3}(?:\.\d+)?")  # a number a grouped column may hold too
_COMMA = re.compile(r"[+-]?\d*,\d+")  # 1,5 or 12,75: a decimal comma, perhaps
_DATE = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def is_gap(cell: str) -> bool:
    return cell.strip().lower() in GAPS


def plain_number(cell: str) -> float | None:
    """``float``'s reading, but not of ``1_000`` (an underscore is no digit separator here)."""
    if "_" in cell:
        return None
    try:
        return float(cell)
    except ValueError:
        return None


def parse(cell: str, fmt: str = PLAIN) -> float | None:
    """The number a stripped, non-gap ``cell`` holds in format ``fmt``; None if it holds none."""
    if fmt == PLAIN:
        return plain_number(cell)
    if fmt == GROUPED:
        if _GROUPED.fullmatch(cell) or _SHORT.fullmatch(cell):
            return float(cell.replace(",", ""))
        return plain_number(cell) if "," not in cell else None
    if fmt == DATE:
        if not _DATE.fullmatch(cell):
            return None
        try:
            moment = datetime.fromisoformat(cell.replace(" ", "T", 1))
        except ValueError:  # 2026-02-30
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return (moment - _EPOCH).total_seconds() / 86400
    if fmt == BOOL:
        lowered = cell.lower()
        return 1.0 if lowered in TRUE else 0.0 if lowered in FALSE else None
    raise ValueError(f"unknown cell format {fmt!r}")


def infer_format(cells: Iterable[str]) -> tuple[str | None, str | None]:
    """The number format every non-gap cell fits, or None (a text column); and a problem, if
    the evidence is ambiguous (a decimal comma, grouped and ungrouped thousands mixed)."""
    present = [cell.strip() for cell in cells if not is_gap(cell)]
    if all(plain_number(cell) is not None for cell in present):
        return PLAIN, None
    lowered = {cell.lower() for cell in present}
    if lowered <= TRUE | FALSE:
        return BOOL, None
    if all(_DATE.fullmatch(cell) and parse(cell, DATE) is not None for cell in present):
        return DATE, None
    comma = next((c for c in present if _COMMA.fullmatch(c) and not _GROUPED.fullmatch(c)), None)
    if comma is not None:
        return None, (
            f"holds '{comma}': a comma that may be a decimal mark, read as neither 15 nor 1.5; "
            "write decimals with a point (1.5) and thousands grouped by threes (1,500)"
        )
    grouped = [cell for cell in present if _GROUPED.fullmatch(cell)]
    if grouped:
        long = next(
            (c for c in present if not _GROUPED.fullmatch(c) and not _SHORT.fullmatch(c)), None
        )
        if long is None:
            return GROUPED, None
        if plain_number(long) is not None:
            return None, (
                f"mixes thousands written '{grouped[0]}' and '{long}'; write them one way"
            )
    return None, None
