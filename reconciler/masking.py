"""Secret values kept out of what the reconciler prints and records.

A ``${{ env.NAME }}`` value resolved into a URL or a header reaches messages written by
others (a server's error page echoing the request, ``http.client`` refusing a header,
a JVM's exception), and they seldom quote it as it was given: a server percent-encodes
it, Python's ``repr`` escapes a trailing newline. So a secret is masked in each of the
spellings a message is known to carry it in, not only the one it was given in.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from urllib.parse import quote, quote_plus

import yaml

from .env_templates import env_names

__all__ = ["Mask", "referenced_secrets", "spellings"]

MASK = "***"


def spellings(secret: str) -> set[str]:
    """``secret`` as given, without the white space around it, percent-encoded (as a
    path segment and as a form value), and escaped as Python's ``repr`` and JSON write
    it (of a ``str`` and of its UTF-8 ``bytes``). White space alone is no secret."""
    if not secret.strip():
        return set()
    forms = {secret, secret.strip()}
    forms |= {quote(f, safe="") for f in list(forms)} | {quote(f) for f in list(forms)}
    forms |= {quote_plus(f) for f in (secret, secret.strip())}
    # inserted verbatim into a URL's query, a server reads each + as a space
    forms |= {f.replace("+", " ") for f in (secret, secret.strip()) if "+" in f}
    for form in (secret, secret.strip()):
        forms.add(repr(form)[1:-1])
        forms.add(repr(form.encode())[2:-1])
        forms.add(json.dumps(form)[1:-1])
    return {f for f in forms if f}


class Mask:
    """Replaces every spelling of the given secrets with ``***``, longest first, so a
    secret that contains another is masked whole."""

    def __init__(self, secrets: Iterable[str]) -> None:
        forms = {form for secret in secrets if secret for form in spellings(secret)}
        self.forms = sorted(forms, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for form in self.forms:
            text = text.replace(form, MASK)
        return text


def referenced_secrets(manifests: Iterable[str], env: Mapping[str, str]) -> set[str]:
    """The values of the environment variables the manifests' templates name, as written
    and as YAML reads them: a double-quoted scalar can spell ``${{`` with escapes
    (``"\\x24{{ env.X }}"``), and the fetch resolves the value YAML gives."""
    names = {name for text in manifests for name in env_names(_with_scalars(text))}
    return {env[name] for name in names if env.get(name)}


def _with_scalars(text: str) -> str:
    """``text`` followed by its YAML scalars' values, read as events: nothing is built,
    so aliases cost nothing, and a text YAML cannot read is taken as it is."""
    try:
        values = [
            e.value
            for e in yaml.parse(text, Loader=yaml.SafeLoader)
            if isinstance(e, yaml.ScalarEvent)
        ]
    except yaml.YAMLError:
        return text
    return "\n".join([text, *values])
