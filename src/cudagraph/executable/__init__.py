"""Layer 4: executables: launch, bind, per-node and whole-graph update, cache."""
