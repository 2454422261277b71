"""``python -m platekit <command>``: the ``platekit`` console script (``commands/_tool.py``)."""

from platekit.commands._tool import main

raise SystemExit(main())
