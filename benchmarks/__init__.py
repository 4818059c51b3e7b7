"""Ratio benchmarks: every figure is reported beside a baseline measured in the same run."""
