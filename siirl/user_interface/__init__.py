"""User-facing node functions: sample filters (DAPO dynamic sampling, embodied sampling) and agent teams."""
