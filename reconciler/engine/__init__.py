"""The Spark engine: session, readers, merge strategies, transforms and query analysis.

Everything that starts a JVM lives here, so the rest of the package (and a plan with no
query changes) runs on a machine without Java.
"""
