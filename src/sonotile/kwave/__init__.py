"""k-Wave's HDF5 files and command line: layout (axis order), reader, writer, output,
checkpoints, the run, ``sonotile-kwave``.

May import: sonotile.parallel, sonotile.solver, sonotile.physics, sonotile.spectral,
sonotile.fft, sonotile.model, sonotile.base.
"""
