"""The benchmark suite: `python -m bench [suite ...]`. Figures are ratios within one run."""
