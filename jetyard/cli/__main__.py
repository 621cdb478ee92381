"""``python -m jetyard.cli``: the ``jetyard`` command (``jetyard up`` starts its services so)."""

import sys

from jetyard.cli.main import main

sys.exit(main())
