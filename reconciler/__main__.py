"""``python -m reconciler`` is the same as the ``reconcile`` command."""

from .cli import main

main()
