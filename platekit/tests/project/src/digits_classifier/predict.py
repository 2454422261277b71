"""Predict with a checkpoint or an exported model.onnx, on arrays, tables or images.

The command's body is platekit's (`platekit.commands.predict`); `platekit eject commands.predict`
copies it here to change it.
"""

from platekit.commands import command, predict

main = command("predict", predict)

if __name__ == "__main__":
    main()
