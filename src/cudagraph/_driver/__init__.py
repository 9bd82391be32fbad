"""The driver layer: the only code that imports ``cuda.bindings``."""
