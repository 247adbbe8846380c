"""``sonotile bench``: throughput, memory, whole-process and scaling measurements, and the
shared benchmark problems. Inputs are written only through :mod:`sonotile.kwave.writer`.

May import: everything below the front ends.
"""
