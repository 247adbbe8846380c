"""The ``sonotile`` command (``cli``: one dispatcher for every subcommand) and the subcommands
that live here: ``demo``, ``plot``, ``validate``. ``sonotile bench`` and ``sonotile batch``
dispatch to :mod:`sonotile.bench` and :mod:`sonotile.batch`.

May import: every layer below the front ends, and the other front ends.
"""
