"""``python -m elastic_sim``: the ``elastic-sim`` command."""

import sys

from elastic_sim.cli import main

sys.exit(main())
