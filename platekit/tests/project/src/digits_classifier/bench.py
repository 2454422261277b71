"""Benchmark the training loop on this machine; print a table and write ``bench.json``.

The command's body is platekit's (`platekit.commands.bench`); `platekit eject commands.bench`
copies it here to change it.
"""

from platekit.commands import bench, command

main = command("bench", bench)

if __name__ == "__main__":
    main()
