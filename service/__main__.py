"""``python -m service``: the ``cardrules`` console script, for where its launcher is
not on the PATH (a bare virtual environment, a debugger)."""

import sys

from service.entry import main

sys.exit(main())
