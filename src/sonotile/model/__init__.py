"""What is simulated: grid, medium, sources, sensors, time axis, checks. numpy only, no JAX.

May import: nothing else in sonotile.
"""
