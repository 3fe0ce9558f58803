"""What a Container source may name: its image, and its variables' names and values.

The fetch builds the runtime's command line from the manifest (``docker run … IMAGE
COMMAND``), and the manifest comes from a pull request. An "image" such as
``--env=AWS_SECRET_ACCESS_KEY`` was read by docker as an option, copying a runner secret
into a container of the next argument's choosing, past the ``env-templates`` policy
(no template was written). So an image must be a reference in the grammar docker and
podman share (the distribution project's: an optional registry host and port, lower-case
path components, a tag, a digest), checked by the plan on what was written and by the
fetch on what the templates resolved to; the fetch also ends the options with ``--``.

Variables go to the runtime through an ``--env-file``, one ``NAME=value`` line each,
which cannot hold a line break or a name with ``=``: both are judged here too, so a plan
tells what the fetch would refuse.
"""

from __future__ import annotations

import re

from .odf.names import shown

_LABEL = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_HOST = rf"{_LABEL}(?:\.{_LABEL})*(?::[0-9]+)?"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_IMAGE = re.compile(rf"(?:{_HOST}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::{_TAG})?(?:@{_DIGEST})?")
_MOST_CHARS = 512  # docker's own limit on a name is 255; past this no grammar is tried

VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BREAKS = ("\n", "\r", "\0")


def image_problem(image: str) -> str | None:
    """Why ``image`` is no image reference (``registry/owner/name:tag@digest``), or None."""
    if len(image) <= _MOST_CHARS and _IMAGE.fullmatch(image):
        return None
    return (
        f"{shown(image)} is no container image reference: [registry[:port]/]name[:tag]"
        "[@digest], its name in lower case"
    )


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be an environment variable's name in an ``--env-file``."""
    if VARIABLE_NAME.fullmatch(name):
        return None
    return f"{shown(name)} is no environment variable's name"


def value_problem(name: str, value: str) -> str | None:
    """Why ``value`` cannot stand in an ``--env-file``; the message names the variable,
    never the value (it may be a secret)."""
    if any(c in value for c in _BREAKS):
        return (
            f"the value of {name} holds a line break or a NUL character, which a"
            " container's environment file cannot hold"
        )
    return None
