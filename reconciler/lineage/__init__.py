"""Lineage, both ways it leaves the repository.

``graph``: which datasets read which, from the manifests and the chains, as a tree,
Mermaid or DOT (``reconcile lineage``). ``openlineage_events`` and ``openlineage_runs``:
the OpenLineage run events an apply emits for each dataset it advances, and what each
run read and wrote.
"""
