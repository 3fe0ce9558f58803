"""What a ``Url`` source may send as headers: their names and their values.

The manifest comes from a pull request, and the URL is what the reviewer and the
``env-templates`` prefixes judge as the place a request (and any secret in it) goes. A
header a virtual host, a proxy or a CDN reads as the real host or path would send it
elsewhere: with ``Host: evil.example`` beside ``${{ env.API_KEY }}`` a shared front end
handed the secret to another site. So those headers are refused, as are names that are no
HTTP token and values that hold a line break (which would start a header of their own).
The plan judges what was written, the fetch what the templates resolved to, with the
same rules, so a plan that passes is one the fetch does not refuse for these reasons.
"""

from __future__ import annotations

import re

SENSITIVE = frozenset({"authorization", "proxy-authorization", "cookie"})
"""Headers whose values are masked in every message whether or not a template wrote them."""

_ROUTING = frozenset(
    {
        "host",
        "forwarded",
        "x-forwarded-host",
        "x-forwarded-server",
        "x-forwarded-prefix",
        "x-host",
        "x-original-host",
        "x-http-host-override",
        "x-original-url",
        "x-rewrite-url",
    }
)
_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110's token
_BREAKS = re.compile(r"[\r\n\0]")


def name_problem(name: str) -> str | None:
    """Why a ``Url`` source may not send a header called ``name``, or None."""
    if not _NAME.fullmatch(name):
        return f"{name!r} is no HTTP header name"
    if name.lower() in _ROUTING:
        return (
            f"header {name!r} may send the request elsewhere than its URL (another host or"
            " path), past the review of the URL and the env-templates prefixes: write the"
            " address in the URL"
        )
    return None


def value_problem(name: str, value: str) -> str | None:
    """Why ``value`` cannot be sent as header ``name``; the message never shows the value
    (it may be a secret)."""
    if _BREAKS.search(value):
        return (
            f"the value of header {name!r} holds a line break or a NUL character, which"
            " HTTP does not allow"
        )
    return None
