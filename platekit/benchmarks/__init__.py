"""Developer benchmarks of platekit (not shipped in its wheel): ``loop_overhead.py``."""
