"""The parts of ``bench.py``: timed loops, time to first step, the printed table."""
