"""The ``reconcile`` commands, one thin module each over the library (see ``cli``)."""
