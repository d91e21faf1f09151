"""What every layer shares and no layer owns: atomic file writes, stable hashes, the rank."""
