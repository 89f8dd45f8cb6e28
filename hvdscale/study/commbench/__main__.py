"""``python -m hvdscale.study.commbench``: one rank of a commbench job (see ``rank``)."""

import sys

from hvdscale.study.commbench.rank import rank_main

if __name__ == "__main__":
    sys.exit(rank_main(sys.argv[1:]))
