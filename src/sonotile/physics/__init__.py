"""The equations: one package per model (``acoustic``, ``elastic``, ``heat``), each behind the
same interface, so that the time loop, the engines, sensors, checkpoints, batches and gradients
never see which model runs.

May import: sonotile.spectral, sonotile.fft, sonotile.model, sonotile.base.
"""
