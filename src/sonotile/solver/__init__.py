"""The time loop for any model: chunks of ``lax.scan`` on an engine (runner), sensors,
compiled chunk programs kept on disk, the checkpointed loop for derivatives, NaN/Inf checks.

May import: sonotile.physics (not a model's package), sonotile.spectral, sonotile.fft,
sonotile.model, sonotile.base.
"""
