"""``${{ env.NAME }}`` templates in fetch steps, resolved only at fetch time.

Manifests are committed to git, so secrets (API keys, bearer tokens) appear in them only
as templates, and a template is resolved at the last moment, by the fetch stage, from an
environment the caller supplies. Nothing else in the reconciler sees resolved values, and
every error here names the variable, never a value.

The syntax is kamu-cli's (``src/infra/core/src/services/ingest/fetch_service/template.rs``):
``${{ env.NAME }}`` with optional whitespace inside the braces, and fallbacks separated by
``||`` that may be further variables, number literals or single-quoted strings, as in
``${{ env.PAGE_SIZE || 100 }}`` or ``${{ env.REGION || 'eu' }}``. The first alternative that
has a value wins.

One deliberate difference: kamu substitutes in a loop that rescans the string after each
replacement, so a value that itself contains ``${{ ... }}`` is expanded again (and a value
containing its own template never terminates). Here the text is scanned once and values are
inserted verbatim.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_TEMPLATE = re.compile(r"\$\{\{([^}]*)\}\}")
_ENV_TOKEN = re.compile(r"^env\.([A-Za-z0-9_-]+)$")
_NUMBER_TOKEN = re.compile(r"^-?[0-9]+(?:\.[0-9]+)?$")
_STRING_TOKEN = re.compile(r"^'([^']*)'$")


class TemplateError(ValueError):
    """A template names an unset variable, or is not a supported expression.

    ``names`` holds the variables that were looked up and not found (empty for a syntax
    error); the message names them too, and never contains a variable's value.
    """

    def __init__(self, message: str, names: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.names = names


def env_names(text: str) -> list[str]:
    """The environment variables ``text``'s templates name, fallbacks included, in order
    (``${{ env.A || env.B }}`` sends B's value when A is unset): what a policy allows
    and what a message must mask. An expression the fetch would refuse names nothing."""
    return [
        m.group(1)
        for template in _TEMPLATE.finditer(text)
        for alternative in template.group(1).split("||")
        if (m := _ENV_TOKEN.match(alternative.strip()))
    ]


def resolve_env(text: str, env: Mapping[str, str]) -> str:
    """Replace every ``${{ env.NAME }}`` in ``text`` with ``env[NAME]``.

    Raises ``TemplateError`` naming the variable when it is unset and the template gives no
    fallback, or when the expression inside the braces is not supported.
    """
    return resolve_env_tracked(text, env)[0]


def resolve_env_tracked(text: str, env: Mapping[str, str]) -> tuple[str, list[str]]:
    """``resolve_env``, plus the variable values it inserted (to redact them from messages).

    Literal fallbacks are not included: they are written in the manifest, so not secret.
    """
    inserted: list[str] = []

    def substitute(match: re.Match[str]) -> str:
        expression = match.group(1).strip()
        missing: list[str] = []
        for alternative in expression.split("||"):
            token = alternative.strip()
            if m := _ENV_TOKEN.match(token):
                name = m.group(1)
                value = env.get(name)
                if value is not None:
                    inserted.append(value)
                    return value
                missing.append(name)
            elif _NUMBER_TOKEN.match(token):
                return token
            elif m := _STRING_TOKEN.match(token):
                return m.group(1)
            else:
                raise TemplateError(
                    f"unsupported template expression {token!r} in ${{{{ {expression} }}}}: "
                    "expected env.NAME, a number or a 'quoted string'"
                )
        names = ", ".join(missing)
        plural = "s" if len(missing) > 1 else ""
        raise TemplateError(
            f"environment variable{plural} {names} not set (needed by ${{{{ {expression} }}}})",
            tuple(missing),
        )

    return _TEMPLATE.sub(substitute, text), inserted
