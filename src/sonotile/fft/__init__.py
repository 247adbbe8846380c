"""FFT backends: XLA's FFT everywhere, FFTW as XLA custom calls on CPUs.

May import: sonotile.base.runtime.
"""
