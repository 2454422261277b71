"""Config checks and Hydra helpers: no torch, no Lightning. Nothing here is public: a
command's config is checked by the ``CheckRun`` callback (``platekit.commands``)."""

__all__: list[str] = []
