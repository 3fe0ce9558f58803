"""Derivative datasets: SQL transforms of other datasets, run on Spark."""
