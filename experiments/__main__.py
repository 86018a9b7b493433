"""Entry point for `python -m experiments`."""

import sys

from experiments import cpu_allocator, errors, thread_pools
from experiments.commands import main

if __name__ == "__main__":
    thread_pools.choose()  # before TensorFlow starts: the commands import it when needed
    cpu_allocator.choose()
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl+C: what it stopped has been ended (a run KILLED)
        print("stopped by Ctrl+C", file=sys.stderr)
        sys.exit(errors.EXIT_INTERRUPTED)
