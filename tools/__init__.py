"""Developer tooling, apart from the application and from its benchmarks (bench/): it imports
neither, and nothing but its own tests imports it (ARCHITECTURE.md)."""
