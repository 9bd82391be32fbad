"""Layer 2: the only code that imports cuda.bindings / cuda.core: checked calls, shims, the compiled module."""
