"""The one exception type for problems a user can cause and fix, and how file text is shown."""

import unicodedata


class UserError(Exception):
    """Bad input, config or file. The entry points print it as one line and exit 1.

    The message names the value, what is wrong with it and how to fix it.
    """


def first_line(error: BaseException, limit: int = 160) -> str:
    """The first line of an error's message (its type if empty), cut to ``limit`` characters."""
    lines = str(error).strip().splitlines()
    text = lines[0] if lines else type(error).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def inert(text: object) -> str:
    """``text`` (a name that came from a file) safe to print: control characters (C0, C1,
    bidi overrides) escaped as ``\\x1b`` / ``\\u202e``; printable Unicode kept."""
    return "".join(
        char if unicodedata.category(char)[0] != "C" else ascii(char)[1:-1] for char in str(text)
    )


def shown(value: object, limit: int = 120) -> str:
    """``value`` for a message, cut: a name is echoed, never a megabyte of it."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
