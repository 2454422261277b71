"""Serve an exported model.onnx over HTTP with onnxruntime (no torch, no Lightning).

The command's body is platekit's (`platekit.commands.serve`); `platekit eject commands.serve`
copies it here to change it.
"""

from platekit.commands import command, serve

main = command("serve", serve)

if __name__ == "__main__":
    main()
