"""Layer 1: the GPU-free definition: graphs, nodes, operands, parameters, checks, rendering."""
