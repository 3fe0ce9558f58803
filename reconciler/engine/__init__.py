"""The Spark engine: the session, the SQL sandbox and query analysis, reading stored slices.

Everything that starts a JVM lives here, so the rest of the package (and a plan with no
query changes) runs on a machine without Java.
"""
