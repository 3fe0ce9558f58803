"""A plan's inputs gathered from the outside world, for the pure planner in ``plan``.

``reconciler.plan`` decides without touching disk, git or Spark; this package reads
the manifests, chains, policies and base ref (``compose``), and what a recreated root
ingested (``root_history``), and hands the planner the one service it may call, a
query validator that starts Spark only on its first use.
"""
