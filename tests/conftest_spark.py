"""Placeholder replaced by the Spark session fixture."""
