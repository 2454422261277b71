"""``python -m platekit <command>``: the ``platekit`` console script (``cli/tool.py``)."""

from .cli.tool import main

raise SystemExit(main())
