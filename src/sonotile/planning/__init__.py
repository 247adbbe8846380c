"""From a CT scan to a simulation: images in and out, tissue properties from Hounsfield units,
a synthetic head phantom, and the transducer and simulation grid in the patient's frame
(docs/planning.md).

May import: every layer below the front ends, and the other front ends.
"""
