"""Utilities: checkpoints (and, with the trainer issue, summaries)."""
