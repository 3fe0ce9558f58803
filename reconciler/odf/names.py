"""Dataset names and input references by the ODF grammar (spec: Aliases and References).

A dataset name becomes a folder under the ODF root, a Spark view and a line of a plan, and
it comes from an unreviewed pull request. The spec's grammar is what keeps it one harmless
path component: ``DatasetName = Hostname``, ``Hostname = Subdomain ("." Subdomain)*``,
``Subdomain = [a-zA-Z0-9]+ ("-" [a-zA-Z0-9]+)*``. It leaves no room for separators,
``.``/``..``, spaces, control characters or non-ASCII letters. The spec sets no length
limit; a name longer than 255 bytes could not be a folder on any common file system, so
that is the limit here. Names are case-insensitive (``ny-newyork`` and ``NY-NewYork`` are
one dataset), which ``name_key`` expresses.
"""

from __future__ import annotations

import re

from .multiformat import DatasetId

MAX_NAME_BYTES = 255
"""The longest dataset name: a folder name's limit on ext4, XFS, APFS and NTFS."""

_SUBDOMAIN = r"[a-zA-Z0-9]+(?:-[a-zA-Z0-9]+)*"
_DATASET_NAME = re.compile(rf"{_SUBDOMAIN}(?:\.{_SUBDOMAIN})*")
_SHOWN_CHARS = 60
"""How much of a refused value a message quotes: enough to find it, never a whole file."""
_EXPECTED = "dot-separated parts of ASCII letters and digits with single inner dashes"


def shown(value: str) -> str:
    """``value`` quoted for a message, control characters escaped and long values cut."""
    if len(value) <= _SHOWN_CHARS:
        return repr(value)
    return repr(value[:_SHOWN_CHARS]) + f"… ({len(value)} characters)"


def name_problem(value: str) -> str | None:
    """Why ``value`` is not a dataset name, or None when it is one."""
    if len(value.encode("utf-8")) > MAX_NAME_BYTES:
        return (
            f"dataset name {shown(value)} is longer than {MAX_NAME_BYTES} bytes "
            f"({len(value.encode('utf-8'))})"
        )
    if _DATASET_NAME.fullmatch(value) is None:
        return (
            f"{shown(value)} is not a valid dataset name: expected {_EXPECTED} "
            "(like org.example.weather)"
        )
    return None


def is_dataset_name(value: str) -> bool:
    return name_problem(value) is None


def check_dataset_name(value: str) -> str:
    """``value`` itself when it is a dataset name, else a ``ValueError`` saying why."""
    problem = name_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def ref_problem(value: str) -> str | None:
    """Why ``value`` cannot be a transform input's ``datasetRef``, or None.

    A reference is a dataset name of this repository or a ``did:odf:`` id. The spec's
    other forms (``account/name``, remote repositories, URLs) address datasets a
    single-tenant repository cannot hold, so they are refused where they are written.
    """
    if value.startswith(DatasetId.PREFIX):
        try:
            DatasetId.parse(value)
        except ValueError:
            return (
                f"{shown(value)} is not a valid dataset id: expected 'did:odf:' and the "
                "multibase of an ed25519 public key"
            )
        return None
    if is_dataset_name(value):
        return None
    return (
        f"{shown(value)} is not a dataset reference: expected a dataset name "
        f"({_EXPECTED}) or a 'did:odf:' id"
    )


def name_key(name: str) -> str:
    """The identity of a name: names that differ only in case are the same dataset."""
    return name.lower()
