"""The analysis library: records, statistics over seeds and the report; no Lightning, Hydra or
OmegaConf, so what it computes is read and tested without a trainer (ARCHITECTURE.md)."""
