"""Check this machine before a long run: versions, devices, precisions, seeding.

The checks are platekit's (`platekit.commands.doctor`).
"""

from platekit.commands import doctor

from . import PROJECT  # noqa: F401  (sets the project whose pins are checked)

if __name__ == "__main__":
    doctor()
