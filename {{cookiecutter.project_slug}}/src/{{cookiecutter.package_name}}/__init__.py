"""Train, evaluate and ship a PyTorch Lightning classifier.

The project's own code: its data modules (``data/``), nets (``models/``) and recipes
(``train.py``, ``eval.py``). The machinery they run on is the pinned ``platekit`` package.
"""

from platekit import Project, use

PROJECT = use(Project.at(__name__, __file__))
