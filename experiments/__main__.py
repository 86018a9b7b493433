"""Entry point for `python -m experiments`."""

import sys

from experiments import errors
from experiments.commands import main

if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl+C: what it stopped has been ended (a run KILLED)
        print("stopped by Ctrl+C", file=sys.stderr)
        sys.exit(errors.EXIT_INTERRUPTED)
