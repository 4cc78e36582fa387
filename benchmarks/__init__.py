"""Benchmarks and load tools: each script prints a table and writes its results under ``benchmarks/results/``."""
