"""The README's quickstart sample is what the default train prints (its deterministic parts)."""

import re
from pathlib import Path

import pytest

from support import ROOT, run_cli

SUMMARY_ROW = re.compile(r"^│ (\S.*?) +│")


def quickstart_sample() -> list[str]:
    """The lines of the README's first sample of a train run (the block with the header)."""
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)
    return next(block for block in blocks if block.startswith("data ")).splitlines()


def deterministic_parts(lines: list[str]) -> dict[str, list[str]]:
    """What any CPU with one thread prints alike: names and counts, not speeds or paths."""
    return {
        "header fields": [line.split("  ")[0] for line in lines[:7]],
        "epochs": [line.split("  ")[0] for line in lines if line.startswith("epoch ")],
        "stop": [line for line in lines if line.startswith("early stopping:")],
        "summary rows": [m.group(1) for line in lines if (m := SUMMARY_ROW.match(line))],
        "summary columns": [line for line in lines if line.startswith("┃ metric")],
        "counts": [
            line for line in lines if line.startswith(("epochs / steps", "best checkpoint  "))
        ],
    }


@pytest.mark.slow
def test_readme_quickstart_sample_matches_a_default_run(tmp_path: Path) -> None:
    # The sample ran at 32-true (what auto picks on a CPU without bfloat16); on one with it,
    # auto trains in bf16-mixed and prints other figures.
    result = run_cli("train", "logger=csv", "trainer.precision=32-true", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert deterministic_parts(result.stdout.splitlines()) == deterministic_parts(
        quickstart_sample()
    )
