"""The HTTP model server of ``python -m <package>.serve``: routes (app.py) and request
bodies (bodies.py). Imports onnxruntime, never torch or Lightning."""
