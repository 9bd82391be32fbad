"""The driver behaviour of each family of node kinds, one module per family (see :mod:`cudagraph.ops.registry`)."""
