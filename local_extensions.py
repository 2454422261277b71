"""Jinja filters the template uses to render answers as data.

``data`` turns a string into a double-quoted literal that TOML, YAML and Python all
read back to the same text. Every character outside printable ASCII is escaped:
``\\uXXXX`` below U+10000 and ``\\UXXXXXXXX`` above it (Jinja's ``tojson`` writes a
surrogate pair there, which TOML rejects and YAML misreads).
"""

from cookiecutter.utils import simple_filter

_SHORT = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(char: str) -> str:
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    if 0x20 <= code < 0x7F:
        return char
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


@simple_filter
def data(value: object) -> str:
    """Render ``value`` as a double-quoted string literal valid in TOML, YAML and Python."""
    return '"' + "".join(_escape(c) for c in str(value)) + '"'
