"""The rules every answer must follow, a valid suggestion for each refused one, and the
command that re-runs the bake with those suggestions.

Plain Python with no Jinja: ``local_extensions`` calls :func:`refusal_report` while
cookiecutter renders the project folder's name, before anything is written, and the
template tests import it directly.
"""

from __future__ import annotations

import json
import keyword
import os
import re
import shlex
import sys
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

TEMPLATE_DIR = Path(__file__).resolve().parent
PROJECT_DIR = TEMPLATE_DIR / "{{cookiecutter.project_slug}}"

# A folder, a distribution and an import name: long enough for any real name, far below
# the 255-byte file-name limit (the slug also prefixes console scripts and file names).
MAX_NAME = 64

# Import names the baked project uses, or that pytest and Python treat specially: a
# package with one of these names would shadow the real module.
RESERVED_MODULES = {
    "torch", "lightning", "pytorch_lightning", "torchmetrics", "hydra", "omegaconf",
    "numpy", "onnx", "onnxruntime", "rich", "yaml", "test", "tests",
    "src", "configs", "scripts", "setup", "main", "site", "typing", "logging",
}  # fmt: skip


def _locked_modules() -> frozenset[str]:
    """Every top-level module any of the project's locks installs (any answer, CPU and CUDA):
    import_names.txt, which ``make lock`` writes from the installed distributions' records."""
    listed = Path(__file__).with_name("import_names.txt")
    lines = listed.read_text(encoding="utf-8").splitlines() if listed.is_file() else []
    return frozenset(line.strip() for line in lines if line.strip() and not line.startswith("#"))


LOCKED_MODULES = _locked_modules()
STDLIB = frozenset(sys.stdlib_module_names)

SLUG = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
PACKAGE = re.compile(r"[a-z][a-z0-9_]*")
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
EMAIL = re.compile(rf"{_ATOM}(?:\.{_ATOM})*@{_LABEL}(?:\.{_LABEL})+")

# Answers typed as free text, in question order; the others are choices cookiecutter checks.
TEXT_KEYS = (
    "project_name", "project_slug", "package_name", "description", "author_name", "author_email",
)  # fmt: skip
# Characters no answer may hold: controls (newline, NUL, escape, DEL...), line and
# paragraph separators, lone surrogates (undecodable bytes on the command line), and
# invisible format characters (U+202E right-to-left override turns a README title around,
# zero-width spaces hide in names).
_CONTROL_CATEGORIES = {"Cc", "Cs", "Zl", "Zp"}
_FORMAT_CATEGORIES = {"Cf"}
_BANNED_CATEGORIES = _CONTROL_CATEGORIES | _FORMAT_CATEGORIES
# The description is the one multi-line answer.
_ALLOWED_IN_DESCRIPTION = {"\n", "\t"}


def _distribution(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _installed_distributions() -> frozenset[str]:
    """Every distribution the baked lock pins (any logger), plus the installers'."""
    lock = PROJECT_DIR / "requirements.lock"
    text = lock.read_text(encoding="utf-8") if lock.is_file() else ""
    names = re.findall(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)==", text, re.MULTILINE)
    return frozenset(_distribution(n) for n in [*names, "pip", "setuptools", "wheel"])


INSTALLED = _installed_distributions()


@dataclass(frozen=True)
class Refusal:
    """One refused answer: the rule it breaks and an answer that passes."""

    key: str
    value: str
    rule: str
    suggestion: str

    def line(self) -> str:
        suggestion = shown(self.suggestion)
        return f"ERROR: {self.key} {shown(self.value)} {self.rule}; answer e.g. {suggestion}"


def shown(value: str, limit: int = 80) -> str:
    """``value`` quoted on one line: controls escaped, long values cut with their length."""
    text = value if len(value) <= limit else value[:limit]
    escaped = "".join(_escape(c) for c in text)
    return f"'{escaped}'" if text == value else f"'{escaped}...' ({len(value)} characters)"


def _escape(char: str) -> str:
    if not _banned(char):
        return char
    named = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
    return named.get(char) or f"\\u{ord(char):04x}"


def _banned(char: str) -> bool:
    return unicodedata.category(char) in _BANNED_CATEGORIES


def _ascii_words(value: str) -> list[str]:
    """The runs of ASCII letters and digits in ``value``, lowercased, accents dropped."""
    folded = unicodedata.normalize("NFKD", value).encode("ascii", "ignore").decode()
    return re.findall(r"[a-z0-9]+", folded.lower())


def _shorten(name: str, separator: str) -> str:
    """``name`` cut to MAX_NAME characters, at a separator where there is one."""
    if len(name) <= MAX_NAME:
        return name
    cut = name[:MAX_NAME]
    if separator in cut[1:]:
        cut = cut[: cut.rindex(separator)]
    return cut.rstrip(separator)


# --- project_slug -------------------------------------------------------------------


def slug_rule(slug: str) -> str | None:
    if not slug:
        return "is empty (it names the project folder and the distribution)"
    if not SLUG.fullmatch(slug):
        return (
            "must be lowercase letters and digits joined by single hyphens, starting with a letter"
        )
    if len(slug) > MAX_NAME:
        return f"is longer than {MAX_NAME} characters"
    if _distribution(slug) in INSTALLED:
        return "is the name of a package the project installs (it would replace it)"
    return None


def suggest_slug(slug: str) -> str:
    words = _ascii_words(slug)
    name = "-".join(words)
    if not name:
        return "my-project"
    if not name[0].isalpha() or _distribution(name) in INSTALLED:
        name = f"my-{name}"
    name = _shorten(name, "-")
    return name if slug_rule(name) is None else "my-project"


# --- package_name -------------------------------------------------------------------


def package_rule(package: str) -> str | None:
    if not package:
        return "is empty (it is the import name under src/)"
    if not package.isidentifier():
        return (
            "is not a valid Python identifier (letters, digits and underscores, not "
            "starting with a digit)"
        )
    if package != package.lower():
        return "has uppercase letters: import names are lowercase (PEP 8)"
    if not PACKAGE.fullmatch(package):
        return "must be ASCII lowercase letters, digits and underscores, starting with a letter"
    if len(package) > MAX_NAME:
        return f"is longer than {MAX_NAME} characters"
    if keyword.iskeyword(package) or keyword.issoftkeyword(package):
        return "is a Python keyword"
    if package in RESERVED_MODULES or package in sys.stdlib_module_names:
        return f"shadows the module '{package}' the project needs"
    if package in LOCKED_MODULES:
        return f"shadows the module '{package}' that the project's locks install"
    return None


def suggest_package(package: str) -> str:
    words = _ascii_words(package)
    name = "_".join(words)
    if not name:
        return "my_project"
    taken = keyword.iskeyword(name) or keyword.issoftkeyword(name)
    if not name[0].isalpha() or taken or name in RESERVED_MODULES | LOCKED_MODULES | STDLIB:
        name = f"my_{name}"
    name = _shorten(name, "_")
    return name if package_rule(name) is None else "my_project"


# --- author_email -------------------------------------------------------------------


def email_rule(email: str) -> str | None:
    if EMAIL.fullmatch(email):
        return None
    return "is not an email address (name@domain.tld, ASCII, no spaces)"


def suggest_email(email: str) -> str:
    squeezed = "".join(c for c in email if not c.isspace() and not _banned(c))
    return squeezed if email_rule(squeezed) is None else "you@example.com"


# --- free text: project_name, author_name, description -----------------------------


def text_rule(value: str, allowed: frozenset[str] = frozenset()) -> str | None:
    bad = sorted({c for c in value if _banned(c) and c not in allowed})
    controls = [c for c in bad if unicodedata.category(c) in _CONTROL_CATEGORIES]
    if controls:
        return f"holds control characters ({', '.join(_escape(c) for c in controls)})"
    if bad:  # format characters only
        listed = ", ".join(_escape(c) for c in bad)
        return f"holds invisible format characters ({listed}), which reorder or hide text"
    return None


def suggest_text(value: str, allowed: frozenset[str] = frozenset()) -> str:
    kept = "".join(c if not _banned(c) or c in allowed else " " for c in value)
    lines = [" ".join(line.split()) for line in kept.split("\n")]
    return "\n".join(lines).strip()


def name_rule(name: str) -> str | None:
    return "is blank (it is the README title)" if not name.strip() else None


def suggest_name(name: str) -> str:
    return suggest_text(name) or "My Project"


def suggest_description(description: str) -> str:
    return suggest_text(description, _DESCRIPTION)


_DESCRIPTION = frozenset(_ALLOWED_IN_DESCRIPTION)
# Each answer's own rule (after the control-character rule every answer follows) and a
# function that turns any value into one that passes both.
RULES: dict[str, tuple[Callable[[str], str | None], Callable[[str], str]]] = {
    "project_name": (name_rule, suggest_name),
    "project_slug": (slug_rule, suggest_slug),
    "package_name": (package_rule, suggest_package),
    "description": (lambda _: None, suggest_description),
    "author_name": (lambda _: None, suggest_text),
    "author_email": (email_rule, suggest_email),
}


def refusals(answers: Mapping[str, object]) -> list[Refusal]:
    """One refusal per answer that breaks its rule, in question order."""
    found = []
    for key in TEXT_KEYS:
        if key not in answers:
            continue
        value = str(answers[key])
        rule, suggest = RULES[key]
        allowed = _DESCRIPTION if key == "description" else frozenset()
        broken = text_rule(value, allowed) or rule(value)
        if broken is not None:
            found.append(Refusal(key, value, broken, suggest(value)))
    return found


# --- the command that re-runs the bake ----------------------------------------------


def _template_defaults() -> dict[str, object]:
    raw = json.loads((TEMPLATE_DIR / "cookiecutter.json").read_text(encoding="utf-8"))
    return {k: v[0] if isinstance(v, list) else v for k, v in raw.items() if not k.startswith("_")}


def _shell_word(text: str) -> str:
    """``text`` as one shell word on one line (bash/zsh ``$'...'`` when it holds controls)."""
    if not any(_banned(c) for c in text):
        return shlex.quote(text)
    body = "".join(
        {"\\": "\\\\", "'": "\\'"}.get(c) or (_escape(c) if _banned(c) else c) for c in text
    )
    return f"$'{body}'"


def rerun_command(answers: Mapping[str, object], fixes: Mapping[str, str]) -> str:
    """``cookiecutter ... --no-input key=value ...`` with ``fixes`` replacing answers.

    Answers left at the template's default are not repeated.
    """
    defaults = _template_defaults()
    words = ["cookiecutter", shlex.quote(str(answers.get("_template", "<template>")))]
    output_dir = answers.get("_output_dir")
    if output_dir and os.path.abspath(str(output_dir)) != os.getcwd():
        words += ["-o", shlex.quote(str(output_dir))]
    words.append("--no-input")
    for key, default in defaults.items():
        if key not in answers:
            continue
        value = str(fixes.get(key, answers[key]))
        if value != default:
            words.append(_shell_word(f"{key}={value}"))
    return " ".join(words)


def refusal_report(answers: Mapping[str, object]) -> str | None:
    """The ERROR lines and the corrected command, or ``None`` when every answer passes."""
    found = refusals(answers)
    if not found:
        return None
    fixes = {r.key: r.suggestion for r in found}
    return "\n".join(
        [
            *(r.line() for r in found),
            "Nothing was written. Re-run with the suggested answers:",
            f"  {rerun_command(answers, fixes)}",
        ]
    )
