"""The analysis library: runs grouped over seeds, their statistics (standard errors, Welch,
Holm), time to target, the eval records, and a sweep's (or run's) report with its two
renderings, the summary files and report.html, and their figures.

Every command (``modes/``) uses it; it imports no Lightning, Hydra or OmegaConf, so what it
computes is read and tested without a trainer (ARCHITECTURE.md).
"""
