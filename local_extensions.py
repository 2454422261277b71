"""The template's Jinja extension: answers are data, never code, and are checked before
anything is written.

``data`` turns a string into a double-quoted literal that TOML, YAML and Python all
read back to the same text. Every character outside printable ASCII is escaped:
``\\uXXXX`` below U+10000 and ``\\UXXXXXXXX`` above it (Jinja's ``tojson`` writes a
surrogate pair there, which TOML rejects and YAML misreads).

Inert answers: cookiecutter renders every context value as a Jinja template
(``cookiecutter.prompt.render_variable``) before any hook runs, and by then an answer given
as ``key=value``, in a ``--config-file`` or in ``~/.cookiecutterrc`` has replaced the
default it answers. So ``{{ 7*7 }}`` became ``49`` and ``{{ cycler.__init__.__globals__... }}``
ran code. This extension is loaded into that environment first; from then on a string is
rendered only when it is one of the template's own values in ``cookiecutter.json`` (the
derived defaults such as ``project_slug``); any other string is an answer and is kept as
typed. (Answers typed at the prompt and replayed answers were never rendered.)

Checked answers: cookiecutter creates the project folder, named by the answer
``project_slug``, before the pre-generation hook could run, so the check sits where that
name is rendered. Every refused answer gets one ``ERROR:`` line, then the command that
re-runs the bake with valid suggestions; cookiecutter's command line prints the message of
a :class:`FailedHookException` without a traceback and exits 1, and nothing is written.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cookiecutter import prompt
from cookiecutter.exceptions import FailedHookException
from jinja2 import Environment
from jinja2.ext import Extension

from torchplate_answers import refusal_report

PROJECT_FOLDER = "{{cookiecutter.project_slug}}"

_SHORT = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(char: str) -> str:
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    if 0x20 <= code < 0x7F:
        return char
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def data(value: object) -> str:
    """Render ``value`` as a double-quoted string literal valid in TOML, YAML and Python."""
    return '"' + "".join(_escape(c) for c in str(value)) + '"'


def _strings(value: object) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*(_strings(k) | _strings(v) for k, v in value.items()))
    if isinstance(value, list):
        return set().union(*(_strings(v) for v in value))
    return set()


# The only strings rendered as Jinja while cookiecutter builds the answers.
TEMPLATE_STRINGS = frozenset(
    _strings(json.loads((Path(__file__).parent / "cookiecutter.json").read_text("utf-8")))
)


class AnswerRefused(FailedHookException):
    """Answers that break a rule: the message holds the ERROR lines and the command to re-run."""


def _keeping_answers(render_variable: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap cookiecutter's ``render_variable`` so answers come back as typed.

    Only environments built with this extension are affected: other templates baked in
    the same process render as cookiecutter does.
    """

    def render(env: Environment, raw: Any, cookiecutter_dict: dict[str, Any]) -> Any:
        if (
            isinstance(raw, str)
            and AnswersAsData.identifier in env.extensions
            and raw not in TEMPLATE_STRINGS
        ):
            return raw
        return render_variable(env, raw, cookiecutter_dict)

    render.keeps_answers = True  # type: ignore[attr-defined]
    return render


class _CheckedFolderName:
    """The project folder's name template: renders only when every answer passes."""

    def __init__(self, template: Any) -> None:
        self._template = template

    def render(self, *args: Any, **context: Any) -> str:
        report = refusal_report(context.get("cookiecutter", {}))
        if report is not None:
            raise AnswerRefused(report)
        return self._template.render(*args, **context)


class AnswersAsData(Extension):
    """The ``data`` filter, inert answers and the answer check (see the module docstring)."""

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        environment.filters["data"] = data
        if not getattr(prompt.render_variable, "keeps_answers", False):
            prompt.render_variable = _keeping_answers(prompt.render_variable)
        from_string = environment.from_string

        def checked_from_string(source: Any, *args: Any, **kwargs: Any) -> Any:
            template = from_string(source, *args, **kwargs)
            return _CheckedFolderName(template) if source == PROJECT_FOLDER else template

        environment.from_string = checked_from_string  # type: ignore[method-assign]
