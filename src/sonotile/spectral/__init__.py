"""Spectral operators on one device: gradients, divergences, fractional Laplacians and source
filters from FFTs (``operators``), device placement (``device``), and the linear fusion
boundaries the derivative rules use (``linear``). Physics packages receive such an operator
object and never see which FFT backend or decomposition is behind it.

May import: sonotile.fft, sonotile.model, sonotile.base.
"""
