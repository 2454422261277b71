"""The loop-overhead benchmark's results as the table ``loop_overhead.py`` prints."""

from typing import Any


def table(results: dict[str, Any]) -> list[str]:
    """One line per figure, grouped by section."""
    setup, loop = results["setup"], results["loop"]
    startup, memory = results["first_step"], results["memory"]
    lines = [
        f"benchmark on {setup['device_name']} ({setup['device']}, {setup['threads']} threads), "
        f"{setup['model']}, batch {setup['batch_size']}, {setup['precision']}, "
        f"{setup['steps']} steps a run, {loop['pairs']} rounds (medians of pairwise ratios, "
        f"{loop['confidence']:.0%} intervals), {setup['clock']} clock",
        "loop efficiency (validation and checkpoints not timed)",
        row("plain PyTorch loop", f"{loop['plain_steps_per_s']:.1f} steps/s"),
        row(
            "bare Lightning",
            f"{loop['bare_lightning_steps_per_s']:.1f} steps/s "
            "(no callbacks, loggers, checkpoints)",
        ),
        row("project loop (Lightning)", f"{loop['lightning_steps_per_s']:.1f} steps/s"),
        row("project / bare Lightning", target_verdict(loop)),
        *plain_loop_note(loop),
        row("project overhead", overhead(loop["over_bare_us_per_step"], "over bare Lightning")),
        row(
            "project / plain loop",
            f"{loop['ratio']:.3f} (information: includes Lightning's own cost; "
            f"bare Lightning {loop['bare_ratio']:.3f})",
        ),
        row("overhead over plain", overhead(loop["overhead_us_per_step"], "over the plain loop")),
        *boundary_rows(results["epoch_boundary"]),
        "memory",
        row(memory["measure"], f"{memory['peak_mb']:.0f} MiB"),
    ]
    if startup:
        lines += startup_rows(startup)
    if results.get("commands"):
        lines += command_rows(results["commands"])
    return lines


def target_verdict(loop: dict[str, Any]) -> str:
    """``0.991 (95 % interval 0.962-1.010 over 9 pairs; target >= 0.97: inconclusive)``."""
    ratio, target = loop["over_bare_ratio"], loop["target_over_bare"]
    verdict = loop["over_bare_verdict"]
    text = f"{ratio:.3f} ({interval(loop['over_bare_interval'], loop['pairs'])}; "
    text += f"target >= {target:g}: {verdict}"
    if verdict == "inconclusive" and loop["over_bare_interval"] is None:
        text += ": no interval to judge by; raise --max-pairs to 6 or more"
    elif verdict == "inconclusive":
        text += ": the interval holds the target; run on a quieter machine or raise --max-pairs"
    return text + ")"


def interval(bounds: list[float] | None, pairs: int) -> str:
    if bounds is None:
        return (
            f"{pairs} pair{'' if pairs == 1 else 's'}, too few for an interval (6 or more give one)"
        )
    return f"interval {bounds[0]:.3f}-{bounds[1]:.3f} over {pairs} pairs"


def plain_loop_note(loop: dict[str, Any]) -> list[str]:
    """A word when bare Lightning outran the plain loop, which should be the fastest."""
    bounds = loop.get("bare_ratio_interval")
    if loop["bare_ratio"] <= 1:
        return []
    if bounds is not None and bounds[0] > 1:
        why = (
            "beyond noise: the plain loop is not the fastest loop on this setup, so the "
            "ratios against it understate Lightning's cost"
        )
    else:
        why = "within the noise of this machine: the runs' speed varied by more than the gap"
    return [row("note", f"bare Lightning ran {loop['bare_ratio']:.3f}x the plain loop, {why}")]


def overhead(us_per_step: float, against: str) -> str:
    """Extra microseconds per step, or why none is shown: a negative median means the
    machine's speed changed between the runs by more than the overhead itself."""
    if us_per_step >= 0:
        return f"{us_per_step:.0f} us/step {against}"
    return (
        f"not measurable ({us_per_step:.0f} us/step {against}: the machine's speed varied "
        "more than that between runs; run on an idle machine or with more --repeats)"
    )


def boundary_rows(boundary: dict[str, Any]) -> list[str]:
    extra = boundary["extra_steps"]
    verdict = "met" if extra <= boundary["target_extra_steps"] else "missed"
    return [
        f"epoch boundary ({boundary['epochs']} epochs of {boundary['steps_per_epoch']} steps, "
        "last.ckpt written at each end, validation aside)",
        row("ordinary step", f"{boundary['step_ms']:.2f} ms"),
        row("step across an epoch boundary", f"{boundary['boundary_ms']:.2f} ms"),
        row(
            "boundary costs",
            f"{extra:.2f} steps extra (target <= {boundary['target_extra_steps']:g}: {verdict})",
        ),
    ]


def startup_rows(startup: dict[str, Any]) -> list[str]:
    parts = startup["parts"].items()
    above = startup["above_import_lightning_seconds"]
    return [
        "time to first step (python -m <package>.train)",
        *(row(f"  {name.replace('_', ' ')}", f"{seconds:.2f} s") for name, seconds in parts),
        row("total", f"{startup['seconds']:.2f} s"),
        row("python -c 'import lightning'", f"{startup['import_lightning_seconds']:.2f} s"),
        row(
            "above import lightning",
            f"{above:.2f} s (target <= {startup['target_above_s']:g} s: "
            f"{'met' if above <= startup['target_above_s'] else 'missed'})",
        ),
    ]


def command_rows(commands: dict[str, Any]) -> list[str]:
    seconds, floor = commands["seconds"], commands["import_lightning_seconds"]
    onnx_goal, above_goal = commands["target_onnx_predict_s"], commands["target_above_import_s"]
    lines = ["commands, launch to exit (fastest of the runs)"]
    for name, value in seconds.items():
        if name == "predict_onnx":
            goal = f"target <= {onnx_goal:g} s: {'met' if value <= onnx_goal else 'missed'}"
        else:
            met = value - floor <= above_goal
            goal = f"import lightning + {value - floor:.2f} s, target <= +{above_goal:g} s: "
            goal += "met" if met else "missed"
        lines.append(row(name.replace("_", " "), f"{value:.2f} s ({goal})"))
    lines.append(row("python -c 'import lightning'", f"{floor:.2f} s"))
    return lines


def row(label: str, value: str) -> str:
    return f"  {label:<30} {value}"
