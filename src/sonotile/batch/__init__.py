"""Many simulations at once: ``sonotile batch`` (k-Wave input files on subsets of the devices)
and :func:`simulate_many` (one grid, many media or sources, in one process).

May import: every layer below the front ends, and the other front ends.
"""
