"""``reconcile apply``: a plan carried out, dataset by dataset, in dependency order.

``run`` walks the plan, appends each dataset's planned metadata (``metadata``), then
ingests a root or runs a derivative's transform; a dataset the plan recreates is built
fresh and swapped in only when that succeeds (``recreate``). The git side of a scheduled
run (commit, push, retry) is ``reconciler.gitloop``'s.
"""
