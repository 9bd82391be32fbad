"""Layer 3a: per-kind driver behaviour: driver parameters, eager issue, executable set, lift."""
