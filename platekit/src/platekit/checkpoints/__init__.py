"""Checkpoints: open, verify, describe, rebuild from, and resume."""
