"""What RE2 accepts but kamu's engine (Rust's ``regex``) reads otherwise is refused by the plan.

A ``fromPath`` regex runs on RE2 here and on Rust's ``regex`` crate in kamu. Inside a
character class Rust reads ``[`` as a nested class and ``&&``, ``--``, ``~~`` as set
operations; since regex 1.10 ``\\<`` and ``\\>`` are word boundaries. RE2 reads all of them
as characters, so the same manifest would take other times (or be refused) in kamu.
"""

from __future__ import annotations

import pytest

from reconciler.manifest_regex import compile_regex
from reconciler.plan.patterns import regex_problem

NESTED = (
    "uses [ inside a character class, which kamu's regex engine (Rust) reads as a nested "
    "class: write \\[ for the character"
)


def set_operation(op: str, name: str) -> str:
    return (
        f"uses the class set operation {op} ({name}), which kamu's regex engine (Rust) "
        "applies inside a character class and RE2 reads as characters: write the class out, "
        f"and \\{op[0]} for the character"
    )


def boundary(ch: str) -> str:
    return (
        f"uses \\{ch} (a word boundary in kamu's regex engine (Rust), a literal {ch} in RE2): "
        f"write {ch} for the character"
    )


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        (r"(\d+)[[]", NESTED),  # Rust: an unclosed class
        (r"^([0-9[x]]+)\.csv$", NESTED),  # Rust: [0-9[x]] then +; RE2: [0-9[x] then ]+
        (r"(\d+)[^a[]", NESTED),
        (r"([[:alpha:][])", NESTED),
        (r"([[:abc])", NESTED),  # no ``:]``: RE2 reads ``[`` as a character
        (r"(\d)[0-9&&[^5]]", set_operation("&&", "intersection")),
        (r"([a-z--b])", set_operation("--", "difference")),
        (r"([0-9~~5])", set_operation("~~", "symmetric difference")),
        (r"(\d)[&&]", set_operation("&&", "intersection")),
        (r"(\d)\>", boundary(">")),
        (r"\<(\d)", boundary("<")),
        (r"(\d)[\<]", boundary("<")),  # Rust: an assertion in a class is an error
        (
            r"([--a])",
            "starts a character class with --, which kamu's regex engine (Rust) reads as "
            "dashes and RE2 as a range: write \\- for each dash",
        ),
        (
            r"([]-a])",
            "starts a character class with ]-, which RE2 reads as a range from ] and "
            "kamu's regex engine (Rust) as the characters: write \\] and \\-",
        ),
        (
            r"([\d-z])",
            "uses \\d- in a character class, a range from a class that kamu's regex engine "
            "(Rust) refuses and RE2 reads as a dash: write \\- for the dash",
        ),
        (
            r"([\p{Greek}-z])",
            "uses \\p{Greek}- in a character class, a range from a class that kamu's regex "
            "engine (Rust) refuses and RE2 reads as a dash: write \\- for the dash",
        ),
    ],
)
def test_what_rust_reads_otherwise_is_refused_with_a_portable_spelling(
    pattern: str, problem: str
) -> None:
    compile_regex(pattern)  # RE2 accepts each: only the plan's own check can refuse it
    assert regex_problem(pattern) == problem


@pytest.mark.parametrize(
    "pattern",
    [
        r"([[:alpha:]]+)",
        r"([[:^xdigit:]][[:word:]])",
        r"([[:alpha:]-z])",
        r"([\[])",
        r"([\[\]]+)",
        r"([a-])",
        r"([-a])",
        r"([--])",
        r"([]a])",
        r"([^]a])",
        r"([-]])",
        r"([A-[])",  # a range ending at [, in both
        r"([a&b~c-])",
        r"([\-\&\~]+)",
        r"([\d-])",
        r"(\d)<x>",
        r"([<>])",
        r"\pL(\d)",
        r"([\x{41}-Z])",
        r"(\d+)-(\d+)",
    ],
)
def test_what_both_read_alike_stays_accepted(pattern: str) -> None:
    assert regex_problem(pattern) is None
