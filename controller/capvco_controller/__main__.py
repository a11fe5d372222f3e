"""``python -m capvco_controller``."""

import sys

from capvco_controller.main import main

sys.exit(main())
