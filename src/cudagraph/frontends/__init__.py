"""Layer 5: interop adapters, the demo and the command line."""
