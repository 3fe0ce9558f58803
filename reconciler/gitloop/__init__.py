"""The GitOps loop's git side: commit what a run advanced, push it, survive races.

A scheduled ``reconcile apply --commit --push`` commits the ODF folder alone, with a
message that says what moved and trailers a machine can read (``message``); it refuses a
working tree whose state the commit would sweep in or leave half-done (``worktree``);
when the push is rejected because the remote moved, it moves to the remote's tip and
reconciles again, never merging blocks of two chains (``push``). A saved plan records
what it was computed from (``fingerprints``) and is applied only while all of it still
holds (``saved_plan``).

Its ``gitops`` module (what a pull request changed, files at a ref) serves planning and
``verify --base`` too: this folder is the only code that talks to git.
"""
