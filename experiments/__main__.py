"""Entry point for `python -m experiments`."""

import sys

from experiments.commands import main

if __name__ == "__main__":
    sys.exit(main())
