"""Limits a query runs under, shared by the sandbox that enforces them and the error
messages that explain them; without Spark, so that reporting an error loads no engine."""

RECURSION_LEVELS = 100
"""The deepest a recursive WITH may go: Spark's default (``spark.sql.cteRecursionLevelLimit``).
A query's ``MAX RECURSION LEVEL`` may lower it, never raise it: a recursion only its data
ends ran over six input rows for minutes at apply, after a clean plan."""
