"""A table that cannot fit is refused before it is read, in one line, leaving no run.

The run sets its own address-space cap (RLIMIT_AS): the process's size after its imports
plus 400 MiB (a whole training run of a small table needs ~350 MiB of address space). A
150 MiB table (reading and setting it up holds up to ~3x its size) cannot fit and is refused
naming the limit; a 1.5 MiB one of the same kind trains under the same cap. A 2 MiB table
whose one category column holds 1,000 values (600 MB of features) is refused once that is
known, before the features are made.
"""

import resource
import subprocess
import sys
from pathlib import Path

import numpy as np

from support import PACKAGE, cli_env

PROBE = f"import {PACKAGE}.train, platekit.data._csv; print(open('/proc/self/status').read())"


def address_space_after_imports() -> int:
    status = subprocess.run(
        [sys.executable, "-c", PROBE], env=cli_env(), capture_output=True, text=True, check=True
    ).stdout
    [line] = [line for line in status.splitlines() if line.startswith("VmSize:")]
    return int(line.split()[1]) * 1024


def write_table(path: Path, rows: int, copies: int = 1) -> Path:
    """``rows`` rows of 8 numbers (with gaps) and a class, written ``copies`` times."""
    generator = np.random.default_rng(0)
    values = generator.normal(size=(rows, 8)).round(6)
    lines = []
    for index, row in enumerate(values):
        cells = ["" if index % 97 == column else f"{v:.6f}" for column, v in enumerate(row)]
        lines.append(",".join(cells) + f",{'xyz'[index % 3]}\n")
    block = "".join(lines)
    with path.open("w") as handle:
        handle.write("a,b,c,d,e,f,g,h,label\n")
        for _ in range(copies):
            handle.write(block)
    return path


def wide_table(path: Path, rows: int) -> Path:
    """A number, a category column of 1,000 values, and a class."""
    lines = ["a,code,label"] + [f"{i % 7},v{i % 1000},{'xyz'[i % 3]}" for i in range(rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


def capped_train(cwd: Path, table: Path, cap: int) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    command = [
        sys.executable, "-m", f"{PACKAGE}.train", "data=csv", f"data.path={table}",
        "data.target=label", "trainer.max_epochs=1", "callbacks.progress_bar=null",
        "+trainer.limit_train_batches=2", "+trainer.limit_val_batches=1",
        "+trainer.limit_test_batches=1",
    ]  # fmt: skip
    return subprocess.run(
        command, cwd=cwd, env=cli_env(), capture_output=True, text=True, preexec_fn=limit,
        timeout=600, check=False,
    )  # fmt: skip


def test_a_table_that_cannot_fit_is_refused_in_one_line(tmp_path: Path) -> None:
    cap = address_space_after_imports() + 400 * 2**20
    table = write_table(tmp_path / "large.csv", 20_000, copies=100)
    assert table.stat().st_size > 140 * 2**20
    refused = capped_train(tmp_path, table, cap)
    assert refused.returncode == 1, refused.stderr[-2000:]
    output = refused.stdout + refused.stderr
    [line] = [line for line in output.splitlines() if line.startswith("error:")]
    assert "to read, but RLIMIT_AS (ulimit -v) leaves" in line
    assert "Traceback" not in refused.stderr
    assert not (tmp_path / "outputs").exists() or not list((tmp_path / "outputs").rglob("*.ckpt"))
    small = write_table(tmp_path / "small.csv", 20_000)  # it fits, and trains
    trained = capped_train(tmp_path / "..", small, cap)
    assert trained.returncode == 0, (trained.stdout + trained.stderr)[-2000:]


def test_a_table_whose_features_cannot_fit_is_refused_once_they_are_known(tmp_path: Path) -> None:
    cap = address_space_after_imports() + 400 * 2**20
    table = wide_table(tmp_path / "wide.csv", 150_000)
    assert table.stat().st_size < 3 * 2**20
    refused = capped_train(tmp_path, table, cap)
    assert refused.returncode == 1, refused.stderr[-2000:]
    output = refused.stdout + refused.stderr
    [line] = [line for line in output.splitlines() if line.startswith("error:")]
    assert "encodes as 150,000 rows x 1,001 features" in line, line
    assert "but RLIMIT_AS (ulimit -v) leaves" in line
    assert "data.features=[...]" in line
    assert "Traceback" not in refused.stderr
    assert not (tmp_path / "outputs").exists() or not list((tmp_path / "outputs").rglob("*.ckpt"))


def unique_target_table(path: Path, rows: int) -> Path:
    """A number and a real-valued target (a price) with a value of its own in every row."""
    lines = "".join(f"{i % 7},{i * 1.000003:.6f}\n" for i in range(rows))
    path.write_text("a,label\n" + lines)
    return path


def test_a_table_of_distinct_texts_is_estimated_by_them_before_reading(tmp_path: Path) -> None:
    # The target is read as texts: a regression target (or an id column) holds a Python
    # string per distinct value, several times the file's bytes; the first block shows it.
    cap = address_space_after_imports() + 400 * 2**20
    table = unique_target_table(tmp_path / "prices.csv", 2_000_000)
    size = table.stat().st_size
    assert 30 * 2**20 < size < 400 * 2**20 // 3  # 3x of it (numbers, categories) would fit
    refused = capped_train(tmp_path, table, cap)
    assert refused.returncode == 1, refused.stderr[-2000:]
    [line] = [line for line in (refused.stdout + refused.stderr).splitlines() if "error:" in line]
    assert "to read, but RLIMIT_AS (ulimit -v) leaves" in line, line
    assert "ran out of memory" not in line
    assert "Traceback" not in refused.stderr


PER_PROCESS = """
import os, resource, sys
from pathlib import Path
from platekit.data._memory import address_space, check_features
from platekit._errors import UserError
cap = address_space() + 2 * 2**30
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
try:
    check_features(Path("t.csv"), 1_000_000, 150)  # 572 MiB in each process
    print("accepted")
except UserError as error:
    print(error)
"""


def test_ddp_ranks_count_their_own_need_against_their_own_address_space() -> None:
    # RLIMIT_AS bounds each process: 8 ranks of 572 MiB each fit under 2 GiB each (the
    # machine's memory, shared, holds the 4.5 GiB they need in all).
    for ranks in ("1", "8"):
        result = subprocess.run(
            [sys.executable, "-c", PER_PROCESS], env=cli_env(LOCAL_WORLD_SIZE=ranks),
            capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
        assert result.stdout.strip() == "accepted", (ranks, result.stdout)
