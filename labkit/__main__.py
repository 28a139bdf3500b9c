"""``python -m labkit <command>`` is the same as ``labkit <command>``."""

import sys

from labkit.cli import main

sys.exit(main())
