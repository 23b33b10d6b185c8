"""`python -m labkit.cli`: the `labkit` command."""

import sys

from . import main

sys.exit(main())
