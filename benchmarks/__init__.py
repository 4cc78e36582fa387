"""Benchmarks and load tools, one folder per claim (agreement/, planner/, performance/, fits/, research/): each script
writes its results under its folder's ``results/``; shared helpers in ``common.py``; benchmarks/README.md maps them."""
