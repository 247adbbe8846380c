"""FFT backends behind one interface, registered and chosen in :mod:`sonotile.fft.backend`:
XLA's FFT everywhere, FFTW as XLA custom calls on CPUs.

May import: sonotile.model, sonotile.base.
"""
