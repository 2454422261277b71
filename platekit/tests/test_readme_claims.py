"""What the READMEs, the guide and the config comments claim holds in a bake.

- every ``key=value`` of a command they show composes and passes the project's config check;
- every internal ``#anchor`` link names a heading of its file;
- every file path they name exists (in the bake, or in the template repo for its own files);
- every parameter count a model config's comment gives is the net's;
- the baked README's groups table lists every config group and option, and no other;
- the baked README's own example (a data module, its config, a model config) trains.
"""

import difflib
import functools
import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from platekit.testing import cli_env as project_env
from platekit.testing import run_cli as run_project_cli

from support import BAKE, CONFIG_DIR, GUIDE, PACKAGE, ROOT, compose_config, module

TEMPLATE = Path(__file__).resolve().parents[2]  # the template repo holding platekit/
DOCS = {
    "baked README.md": ROOT / "README.md",
    "baked docs/guide.md": GUIDE,  # the bake's, else the template's (the fixture has none)
    "template README.md": TEMPLATE / "README.md",
    "platekit/README.md": TEMPLATE / "platekit" / "README.md",
}
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
INLINE = re.compile(r"`([^`\n]+)`")
# A command whose key=value arguments are Hydra overrides: make <target> or python -m <pkg>.<cmd>.
COMMAND = re.compile(
    r"(?:^|[\s/])(?:make (?P<target>[a-z-]+)|python -m [\w{} .]*?\.(?P<entry>[a-z]+))(?=\s|$)"
)
CONFIG_OF = {
    "train": "train", "eval": "eval", "export": "export", "predict": "predict",
    "sweep": "train", "serve": "serve",
}  # fmt: skip
# make's variables that become overrides (the Makefile passes them on).
MAKE_VARIABLES = {
    "CKPT": "ckpt_path", "MODEL": "model_path", "INPUTS": "inputs", "WORKERS": "sweep.workers",
    "PORT": "port", "HOST": "host",
}  # fmt: skip
PLACEHOLDER = re.compile(r"[<>*]|\.\.\.|\$\(")


def docs_present() -> dict[str, Path]:
    """The documents this checkout has (the template's own only next to platekit/)."""
    return {name: path for name, path in DOCS.items() if path.is_file()}


def code_lines(text: str) -> list[str]:
    """Command lines of the shell blocks and inline code spans, comments dropped."""
    lines = []
    for language, body in BLOCK.findall(text):
        if language in ("bash", "sh", ""):
            lines += [line.split("  #", 1)[0] for line in body.splitlines()]
    prose = BLOCK.sub("", text)
    lines += [span for span in INLINE.findall(prose) if COMMAND.search(span)]
    return lines


def readme_defined_options(text: str) -> set[str]:
    """``group=option`` pairs the README itself asks the reader to create (``# configs/...``)."""
    found = re.findall(r"^# configs/(\w+)/(\w+)\.yaml$", text, re.MULTILINE)
    return {f"{group}={option}" for group, option in found}


def commands(text: str) -> list[tuple[str, str, list[str]]]:
    """``(line, config name, overrides)`` of every Hydra command the text shows."""
    found = []
    for line in code_lines(text):
        match = COMMAND.search(line)
        if not match:
            continue
        name = match.group("target") or match.group("entry")
        if name not in CONFIG_OF:
            continue
        try:
            words = shlex.split(line[match.end() :])
        except ValueError:
            continue
        overrides = []
        for word in words:
            if word.startswith("ARGS="):
                overrides += shlex.split(word.removeprefix("ARGS="))
            elif word.split("=")[0] in MAKE_VARIABLES:
                key, _, value = word.partition("=")
                overrides.append(f"{MAKE_VARIABLES[key]}={value}")
            elif "=" in word and not word.startswith("-") and not word.split("=")[0].isupper():
                overrides.append(word)
        if name == "sweep":
            overrides.insert(0, "hparams_search=optuna")
        if overrides:
            found.append((line.strip(), CONFIG_OF[name], overrides))
    return found


def readme_commands() -> list[tuple[str, str, str, list[str]]]:
    cases = []
    for doc, path in docs_present().items():
        text = path.read_text()
        own = readme_defined_options(text)
        for line, config, overrides in commands(text):
            if own & set(overrides) or any(PLACEHOLDER.search(o) for o in overrides):
                continue  # the README's own example files: test_readme_example_trains
            cases.append((doc, line, config, overrides))
    for config_file in sorted(CONFIG_DIR.rglob("*.yaml")):  # commands in config comments
        comments = "\n".join(
            line.lstrip("# ") for line in config_file.read_text().splitlines() if "#" in line
        )
        for line, config, overrides in commands(comments):
            cases.append((config_file.relative_to(ROOT).as_posix(), line, config, overrides))
    return cases


COMMANDS = readme_commands()


@pytest.mark.parametrize(
    ("doc", "line", "config", "overrides"),
    COMMANDS,
    ids=[f"{doc}: {line[:60]}" for doc, line, _, _ in COMMANDS],
)
def test_every_override_a_document_shows_passes_the_config_check(
    doc: str, line: str, config: str, overrides: list[str], tmp_path: Path
) -> None:
    given = [o.replace("$PWD", str(tmp_path)) for o in overrides]
    OmegaConf.register_new_resolver("run_dir", module("config._resume").run_dir, replace=True)
    planned = module("config._check").check(CONFIG_DIR, config, given)
    assert planned.problems == [], f"{doc}: {line}"


def test_the_documents_show_commands_to_check() -> None:
    shown = {doc for doc, *_ in COMMANDS}
    assert "baked README.md" in shown
    assert len(COMMANDS) >= 10


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lowercase, punctuation dropped, spaces as '-'."""
    text = re.sub(r"[`*_]", "", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def linked(doc: str, target: str) -> Path:
    """The file a relative link of ``doc`` names. A baked document links within the bake:
    where the project at hand lacks the file (the fixture project holds no docs/), it is the
    template's bake folder's."""
    path = DOCS[doc].parent / target
    if doc.startswith("baked ") and not path.is_file():
        inside = Path(doc.removeprefix("baked ")).parent  # the document's folder in a bake
        path = BAKE / inside / target
    return path


@pytest.mark.parametrize("doc", list(DOCS))
def test_every_internal_link_names_a_heading(doc: str) -> None:
    if doc not in docs_present():
        pytest.skip(f"{doc} is not in this checkout")
    text = DOCS[doc].read_text()
    prose = BLOCK.sub("", text)
    anchors = {github_anchor(h) for h in re.findall(r"^#{1,6} (.+)$", prose, re.MULTILINE)}
    links = re.findall(r"\]\(#([^)]+)\)", prose)
    assert [link for link in links if link not in anchors] == []
    for target, anchor in re.findall(r"\]\(([\w./{}-]+\.md)#([^)]+)\)", prose):
        other = BLOCK.sub("", linked(doc, target).read_text())
        headings = {github_anchor(h) for h in re.findall(r"^#{1,6} (.+)$", other, re.MULTILINE)}
        assert anchor in headings, f"{target}#{anchor}"


PATH = re.compile(
    r"(?<![\w./-])((?:configs|src|scripts|tests|vendor|tools|hooks|platekit|docs|\.github)"
    r"/[\w./{}-]*[\w}])"
)


def named_paths(text: str) -> set[str]:
    """File paths a document names, less those it asks the reader to create."""
    created = set(re.findall(r"^# ((?:configs|src)/\S+)$", text, re.MULTILINE))
    created |= set(re.findall(r"(?:into|write) `([^`]+)`", text))  # "copy ... into `...`"
    paths = set(PATH.findall(text)) - created
    return {p for p in paths if not re.search(r"[<*]|\.\.\.|/runs/", p)}


@pytest.mark.parametrize(
    "doc",
    [pytest.param(d, marks=[pytest.mark.bake] if d == "baked README.md" else []) for d in DOCS],
)
def test_every_file_a_document_names_exists(doc: str) -> None:
    if doc not in docs_present():
        pytest.skip(f"{doc} is not in this checkout")
    path = DOCS[doc]
    package_dir = ROOT / "src" / PACKAGE
    bake = TEMPLATE / "{{cookiecutter.project_slug}}"  # the template README names a bake's files
    bases = [path.parent, ROOT, package_dir, TEMPLATE, TEMPLATE / "platekit", bake]
    missing = []
    for name in named_paths(path.read_text()):
        name = name.replace("{{ cookiecutter.package_name }}", PACKAGE)
        if not any((base / name).exists() for base in bases):
            missing.append(name)
    assert sorted(missing) == []


def test_parameter_counts_in_model_configs_are_the_nets() -> None:
    checked = 0
    for config_file in sorted((CONFIG_DIR / "model").glob("*.yaml")):
        comments = " ".join(line for line in config_file.read_text().splitlines() if "#" in line)
        for claim in re.findall(r"([\d,]+) parameters", comments):
            option = config_file.stem
            cfg = compose_config(ROOT, [f"model={option}"])
            net = instantiate(cfg.model.net, input_shape=(1, 8, 8), num_outputs=10)
            assert int(claim.replace(",", "")) == sum(p.numel() for p in net.parameters()), option
            checked += 1
        assert not re.search(r"~?\d+(\.\d+)?k-parameter", comments), config_file.name
    assert checked >= 1  # cnn.yaml states its size


def groups_table() -> dict[str, set[str]]:
    """``{group: {options}}`` of the baked README's table of config groups."""
    text = (ROOT / "README.md").read_text()
    start = text.index("| group | options |")
    table = {}
    for row in text[start:].splitlines()[2:]:
        if not row.startswith("|"):
            break
        groups_cell, options_cell = [cell.strip() for cell in row.strip("|").split("|")]
        groups = re.findall(r"`(\w+)`", groups_cell)
        parts = options_cell.split(" / ") if len(groups) > 1 else [options_cell]
        assert len(parts) == len(groups), row
        for group, part in zip(groups, parts, strict=True):
            table[group] = set(re.findall(r"`(\w+)`", part))
    return table


def test_the_groups_table_lists_every_group_and_option() -> None:
    groups = {
        folder.name: {path.stem for path in folder.glob("*.yaml")}
        for folder in CONFIG_DIR.iterdir()
        if folder.is_dir()
    }
    assert groups_table() == groups


def readme_example(text: str) -> dict[str, str]:
    """``{relative path: content}`` of the code blocks that open with ``# <path>``."""
    files = {}
    for _, body in BLOCK.findall(text):
        if match := re.match(r"# ((?:configs|src)/\S+)\n", body):
            files[match.group(1)] = body
    return files


@pytest.mark.slow
def test_readme_example_trains(tmp_path: Path) -> None:
    """The README's data module, its config and the model config, written as it shows them."""
    project = tmp_path / "project"
    shutil.copytree(ROOT, project, ignore=shutil.ignore_patterns("outputs", ".venv", ".git"))
    files = readme_example((ROOT / "README.md").read_text())
    assert {"configs/data/spirals.yaml", "configs/model/wide_mlp.yaml"} <= set(files)
    for relative, body in files.items():
        (project / relative).write_text(body)
    env = project_env(PYTHONPATH=str(project / "src"), CONFIG_DIR=str(project / "configs"))

    def train(*overrides: str) -> subprocess.CompletedProcess[str]:
        return run_project_cli("train", *overrides, cwd=project, env=env)

    # "make train ARGS="data=spirals model=mlp"", one batch of each stage
    result = train("data=spirals", "model=mlp", "data.noise=0.1", "debug=fast_dev_run")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "SpiralsDataModule: train" in result.stdout
    result = train("model=wide_mlp", "debug=fast_dev_run")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    # "a typo (data.nosie=0.1) or a wrong type (data.noise=abc) is refused in one line"
    for override, error in [
        ("data.nosie=0.1", "data.nosie is not a setting of"),
        ("data.noise=abc", "data.noise"),
    ]:
        refused = train("data=spirals", "model=mlp", override, "debug=fast_dev_run")
        assert refused.returncode == 1, override
        assert error in refused.stdout + refused.stderr, refused.stdout[-2000:]


GROUPS = ("data", "model", "optimizer", "scheduler", "trainer", "callbacks", "sweep", "paths")
# An inline `key=value` (or several) or a bare `group.key` a document's prose names.
SETTING = re.compile(rf"^\+?(?:{'|'.join(GROUPS)})\.[\w.]+(=\S*)?(?: \+?[\w.]+=\S*)*$")
FILE_NAME = re.compile(r"\.(onnx|ckpt|json|yaml|py|csv|npy|png|txt|log|db)$")
# Prose that says the setting is refused: "a typo (`x`)", "keys that moved (`x`", "`x` is gone".
REFUSED_BEFORE = re.compile(r"(moved|typo|wrong type|refused) \($")
REFUSED_AFTER = ("` is gone", "` is refused")


def example_keys(text: str) -> set[str]:
    """The settings of the config files a README asks the reader to write (``# configs/...``)."""
    keys = set()
    for _, body in BLOCK.findall(text):
        if body.startswith("# configs/"):
            keys |= set(re.findall(r"^(\w+):", body, re.MULTILINE))
    return keys


def mentioned_settings() -> list[tuple[str, str, bool]]:
    """``(document, span, refused)`` of every setting a document's prose names in backticks;
    ``refused``: the prose says the project refuses it."""
    found = []
    for doc, path in docs_present().items():
        text = path.read_text()
        examples = example_keys(text)
        prose = BLOCK.sub("", text)
        for match in INLINE.finditer(prose):
            span = match.group(1)
            line = prose[prose.rfind("\n", 0, match.start()) + 1 : prose.find("\n", match.end())]
            if not SETTING.match(span) or FILE_NAME.search(span) or "platekit." in line:
                continue
            if PLACEHOLDER.search(span) or (doc, span) in {(d, s) for d, s, _ in found}:
                continue
            key = span.split("=", 1)[0].lstrip("+")
            refused = bool(REFUSED_BEFORE.search(prose[max(0, match.start() - 30) : match.start()]))
            refused |= prose[match.end() - 1 :].startswith(REFUSED_AFTER)
            leaf = key.rsplit(".", 1)[1]
            if not refused and difflib.get_close_matches(leaf, examples, cutoff=0.7):
                continue  # the README's own example's setting: test_readme_example_trains
            found.append((doc, span, refused))
    return found


def accepted(overrides: list[str]) -> bool:
    """Whether the train config takes ``overrides``, alone or with some option of their group
    (``data.crop_padding=4`` is image_folder's), or with the sweep's settings."""
    OmegaConf.register_new_resolver("run_dir", module("config._resume").run_dir, replace=True)
    group = overrides[0].lstrip("+").split(".", 1)[0]
    options = [path.stem for path in (CONFIG_DIR / group).glob("*.yaml")]
    choices = [[], *([f"{group}={o}"] for o in options), ["hparams_search=optuna"]]
    for choice in choices:
        try:
            planned = module("config._check").check(CONFIG_DIR, "train", [*choice, *overrides])
        except Exception:  # Hydra refused the key
            continue
        if not planned.problems:
            return True
    return False


MENTIONS = mentioned_settings()
_ABSENT = object()


@functools.cache
def composed_with(choice: tuple[str, ...]) -> DictConfig:
    return compose_config(Path("/nonexistent"), list(choice))


def in_some_config(key: str) -> bool:
    """Whether a config file sets ``key``, under some option of its group or the sweep's."""
    group = key.split(".", 1)[0]
    options = sorted(path.stem for path in (CONFIG_DIR / group).glob("*.yaml"))
    choices = [(), *((f"{group}={o}",) for o in options), ("hparams_search=optuna",)]
    return any(
        OmegaConf.select(composed_with(choice), key, default=_ABSENT) is not _ABSENT
        for choice in choices
    )


@pytest.mark.parametrize(
    ("doc", "span", "refused"), MENTIONS, ids=[f"{d}: {s}" for d, s, _ in MENTIONS]
)
def test_every_setting_a_document_names_is_one_the_project_takes(
    doc: str, span: str, refused: bool
) -> None:
    if "=" in span:  # a placeholder value (N, E) stands for a number
        options = [[re.sub(r"=[A-Z]$", "=1", word) for word in span.split()]]
    elif in_some_config(span) and not refused:
        return  # a key a config file sets
    else:  # a key a class declares, or none: a value of the right type must pass the check
        options = [
            [f"{plus}{span}={value}"]
            for plus in (("+", "") if span.startswith("trainer.") else ("",))  # + Lightning's
            for value in ("1", "0.1", "true", "null", ".")
        ]
    assert any(accepted(overrides) for overrides in options) != refused, f"{doc}: `{span}`"


def test_the_template_options_table_lists_every_question_and_choice() -> None:
    if "template README.md" not in docs_present():
        pytest.skip("the template README is not in this checkout")
    questions = json.loads((TEMPLATE / "cookiecutter.json").read_text())
    text = DOCS["template README.md"].read_text()
    table = text[text.index("| question | default |") :].split("\n\n", 1)[0]
    rows = {  # the question(s) of the first cell: the row
        name: row
        for row in table.splitlines()[2:]
        for name in re.findall(r"`(\w+)`", row.split("|")[1])
    }
    for name, answer in questions.items():
        if name.startswith("_"):
            continue
        assert name in rows, name
        for choice in answer if isinstance(answer, list) else []:
            assert re.search(rf"\b{re.escape(choice)}\b", rows[name]), (name, choice)
    assert set(rows) <= set(questions)


# What a data config's comment may claim of its data, and how the data module shows it.
DATA_CLAIMS = {
    r"([\d,]+) (?:rows|patients|8x8 grey images)": lambda info: sum(info.split_sizes.values()),
    r"(\d+) (?:features|measurements)": lambda info: info.input_shape[-1],
    r"(\d+) (?:classes|cultivars)": lambda info: info.num_classes,
    r"(\d+)x\d+ grey": lambda info: info.input_shape[-1],
}


@pytest.mark.parametrize("option", ["digits", "diabetes", "csv"])
def test_the_numbers_a_data_config_claims_are_its_data(option: str, tmp_path: Path) -> None:
    comments = " ".join(
        line for line in (CONFIG_DIR / "data" / f"{option}.yaml").read_text().splitlines()
        if line.startswith("#")
    )  # fmt: skip
    cfg = compose_config(tmp_path, [f"data={option}", f"paths.data_dir={tmp_path}"])
    info = instantiate(cfg.data).info
    claims = {
        pattern: int(match.group(1).replace(",", ""))
        for pattern in DATA_CLAIMS
        if (match := re.search(pattern, comments))
    }
    assert claims, f"configs/data/{option}.yaml claims no number this test knows"
    for pattern, claimed in claims.items():
        assert DATA_CLAIMS[pattern](info) == claimed, (option, pattern)
