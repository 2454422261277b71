"""Validate the answers before anything is written.

A bad answer prints one line, ``ERROR: <field> '<value>' <rule>; <how to fix>``, and
exits 1; cookiecutter then removes the half-made output folder.
"""

import keyword
import re
import sys

ANSWERS = {
    "project_slug": {{ cookiecutter.project_slug|data }},
    "package_name": {{ cookiecutter.package_name|data }},
    "author_email": {{ cookiecutter.author_email|data }},
}

# Names the baked project imports, or that pytest and Python treat specially: a package
# with one of these names would shadow the real module.
RESERVED = {
    "torch", "lightning", "pytorch_lightning", "torchmetrics", "hydra", "omegaconf",
    "sklearn", "numpy", "onnx", "onnxruntime", "rich", "yaml", "test", "tests",
    "src", "configs", "scripts", "setup", "main", "site", "typing", "logging",
}
SLUG = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
PACKAGE = re.compile(r"^[a-z_][a-z0-9_]*$")
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def problems(answers: dict[str, str]) -> list[str]:
    """Return one message per rejected answer, in question order."""
    found = []
    slug = answers["project_slug"]
    if not SLUG.match(slug):
        found.append(
            f"project_slug '{slug}' must be lowercase letters and digits joined by single "
            "hyphens, starting with a letter; answer e.g. 'my-project'"
        )
    package = answers["package_name"]
    if not PACKAGE.match(package) or not package.isidentifier():
        found.append(
            f"package_name '{package}' is not a valid Python identifier (lowercase letters, "
            "digits, underscores; no leading digit); answer e.g. 'my_project'"
        )
    elif keyword.iskeyword(package) or keyword.issoftkeyword(package):
        found.append(
            f"package_name '{package}' is a Python keyword; answer another name, "
            f"e.g. '{package}_lib'"
        )
    elif package in RESERVED or package in sys.stdlib_module_names:
        found.append(
            f"package_name '{package}' shadows the module '{package}' the project needs; "
            f"answer another name, e.g. 'my_{package}'"
        )
    email = answers["author_email"]
    if not EMAIL.match(email):
        found.append(
            f"author_email '{email}' is not an email address; answer e.g. 'you@example.com'"
        )
    return found


def main() -> int:
    found = problems(ANSWERS)
    for message in found:
        print(f"ERROR: {message}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
