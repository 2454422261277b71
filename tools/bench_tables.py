"""Reading and encoding big tables: seconds and peak memory, as a train run reads them.

    .venv/bin/python tools/bench_tables.py            # both tables (about 1 GB of disk, minutes)
    .venv/bin/python tools/bench_tables.py --rows 300000   # smaller, quicker

Writes two CSV tables into a temporary folder: a numeric one (3,000,000 rows of 12 plain
numbers and a class, ~305 MiB) and a mixed one (1,000,000 rows: 4 numbers with gaps, 3
category columns with gaps, a class). Each is set up by ``CsvDataModule`` in a fresh
process (read, typed, encoded, split, fingerprinted); the figures are the set-up's wall time
and its peak RSS above the RSS after imports, against the file's size. Targets: <= 15 s and
<= 10 s on 2 cores, peak <= 3x the file.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

CHILD = """
import json, resource, sys, time
from pathlib import Path
import torch, pyarrow, pyarrow.csv, pyarrow.compute
from platekit.data._csv import CsvDataModule
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) * 1024
base = rss()
start = time.perf_counter()
module = CsvDataModule(path=sys.argv[1], target="label")
module.setup()
module.fingerprint("test")
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": seconds, "peak_above": peak - base, "rows": len(module.rows)}))
"""


def numeric_table(path: Path, rows: int) -> Path:
    generator = np.random.default_rng(0)
    with path.open("w") as handle:
        handle.write(",".join(f"x{i}" for i in range(12)) + ",label\n")
        for start in range(0, rows, 100_000):
            block = generator.normal(size=(min(100_000, rows - start), 12)).round(6)
            labels = generator.integers(0, 3, len(block))
            lines = [",".join(map(repr, row.tolist())) + f",{y}" for row, y in zip(block, labels)]
            handle.write("\n".join(lines) + "\n")
    return path


def mixed_table(path: Path, rows: int) -> Path:
    generator = np.random.default_rng(1)
    cities, plans, colours = ["Lyon", "Nice", "Paris", "Lille"], ["basic", "pro"], list("rgbcmy")
    with path.open("w") as handle:
        handle.write("a,b,c,d,city,plan,colour,label\n")
        for start in range(0, rows, 100_000):
            count = min(100_000, rows - start)
            numbers = generator.normal(size=(count, 4)).round(4)
            gaps = generator.random((count, 7)) < 0.05
            lines = []
            for i in range(count):
                cells = [repr(v) for v in numbers[i].tolist()]
                cells += [cities[i % 4], plans[i % 2], colours[i % 6]]
                cells = ["" if gaps[i, j] else cell for j, cell in enumerate(cells)]
                lines.append(",".join(cells) + f",{'xyz'[i % 3]}")
            handle.write("\n".join(lines) + "\n")
    return path


def measure(path: Path) -> dict[str, float]:
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)],
        capture_output=True, text=True, check=True, env={"OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    size = path.stat().st_size
    return {**figures, "mib": size / 2**20, "times_file": figures["peak_above"] / size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3_000_000, help="rows of the numeric table")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for name, make, rows, target in (
            ("numeric", numeric_table, args.rows, 15),
            ("mixed", mixed_table, args.rows // 3, 10),
        ):
            path = make(Path(folder) / f"{name}.csv", rows)
            figures = measure(path)
            print(
                f"{name}: {figures['rows']:,} rows, {figures['mib']:.0f} MiB: "
                f"{figures['seconds']:.1f} s (target <= {target} s), peak "
                f"{figures['peak_above'] / 2**20:,.0f} MiB above imports = "
                f"{figures['times_file']:.1f}x the file (target <= 3x)"
            )
            path.unlink()


if __name__ == "__main__":
    main()
