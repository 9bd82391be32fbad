"""Layer 3b: the generic loops that turn a definition into driver work."""
