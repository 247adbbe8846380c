"""sonotile: nonlinear ultrasound in tissue with k-Wave's k-space pseudospectral method on JAX."""

__version__ = "0.1.0"
