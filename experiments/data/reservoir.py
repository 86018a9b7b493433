"""`Reservoir`: a uniform random sample of a stream, in one pass and bounded memory."""

from __future__ import annotations

import random


class Reservoir:
    """At most `size` of the items offered, each equally likely to be kept (Vitter's
    algorithm R), drawn from `seed` alone: the same stream gives the same sample.

    Attributes:
        items: the sample, in the order the slots were filled (not the stream's).
        seen: how many items were offered.
    """

    def __init__(self, size: int, seed: int):
        self.size, self.items, self.seen = size, [], 0
        self._rng = random.Random(seed)

    def offer(self, item) -> None:
        """Keep `item` in the sample with probability `size / (seen + 1)`."""
        if self.seen < self.size:
            self.items.append(item)
        else:
            j = self._rng.randrange(self.seen + 1)
            if j < self.size:
                self.items[j] = item
        self.seen += 1
