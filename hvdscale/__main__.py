"""``python -m hvdscale``."""

import sys

from hvdscale.cli import main

sys.exit(main())
