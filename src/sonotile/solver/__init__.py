"""One device's numerics in JAX: spectral operators, per-device constants (plan), the time
step, sensors, the chunked time loop (runner).

May import: sonotile.model, sonotile.fft, sonotile.base.runtime.
"""
