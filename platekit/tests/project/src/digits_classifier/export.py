"""Export a checkpoint to one self-contained ``model.onnx``, then prove it matches PyTorch.

The command's body is platekit's (`platekit.commands.export`); `platekit eject commands.export`
copies it here to change it.
"""

from platekit.commands import command, export

main = command("export", export)

if __name__ == "__main__":
    main()
