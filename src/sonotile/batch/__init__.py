"""Many simulations at once: ``sonotile batch`` (k-Wave input files on subsets of the devices)
(``simulate_many`` is in :mod:`sonotile.api.batches`; ``sonotile.batch.many`` imports it).

May import: every layer below the front ends, and the other front ends.
"""

from sonotile.base.moved import keep_importable

keep_importable({"sonotile.batch.many": "sonotile.api.batches"})
