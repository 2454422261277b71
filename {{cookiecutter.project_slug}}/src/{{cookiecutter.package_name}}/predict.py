"""Predict with a checkpoint or an exported model.onnx, on arrays, tables or images.

The command's body is platekit's (`platekit.commands.predict`); `platekit eject commands.predict`
copies it here to change it.
"""

from platekit.commands.predict import predict

from . import PROJECT

main = PROJECT.command("predict", predict)

if __name__ == "__main__":
    main()
