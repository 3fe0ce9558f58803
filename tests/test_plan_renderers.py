"""The text, Markdown and JSON renderings of a hand-built plan, compared in full.

The plan below is the one a reviewer meets most: a new root, a derivative whose query
drops, adds and retypes columns, an unchanged dataset downstream of it, an orphaned
chain, a root with data pending, verdicts of both severities and a located problem.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from typing import Any

from jsonschema import Draft202012Validator

from reconciler.apply.outcome import Outcome, Status
from reconciler.commands.progress import describe
from reconciler.odf.json_schemas import SCHEMA_DIR, validator
from reconciler.plan.model import (
    Action,
    Blocked,
    ChangeClass,
    Column,
    DatasetPlan,
    EventChange,
    Location,
    Pending,
    Plan,
    Problem,
    QueryCheck,
    SchemaChange,
    Severity,
    Verdict,
)
from reconciler.plan.render_json import plan_to_dict, render_json
from reconciler.plan.render_markdown import render_markdown
from reconciler.plan.render_text import render_text

DID_TICKS = "did:odf:fed01816ef0a9abe93aba816ef0a9abe93aba90e6065747170300c0d3d30c2cd8d7a4"
DID_DAILY = "did:odf:fed0119d6fbd1e7ff7b1a7a2f2f0bd0e06a0cbb7e0f5b3a7c6d4a1f2e3d4c5b6a7981"
DID_WEEKLY = "did:odf:fed0127a4c1d0e9f8b7a6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b21"
COMMIT = "4f1c2a9e8b7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b"
DID_LEGACY = "did:odf:fed01a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5"

POLLING_SOURCE = {
    "kind": "SetPollingSource",
    "fetch": {"kind": "Url", "url": "https://example.org/prices.csv"},
    "read": {
        "kind": "Csv",
        "header": True,
        "schema": ["date TIMESTAMP", "symbol STRING", "price DECIMAL(18,4)"],
    },
    "merge": {"kind": "Ledger", "primaryKey": ["date", "symbol"]},
}
INFO = {"kind": "SetInfo", "description": "Daily closing prices", "keywords": ["finance", "prices"]}
LICENSE = {
    "kind": "SetLicense",
    "shortName": "CC-BY-4.0",
    "spdxId": "CC-BY-4.0",
    "name": "Creative Commons Attribution 4.0 International",
    "websiteUrl": "https://creativecommons.org/licenses/by/4.0/",
}
OLD_QUERY = "SELECT\n  event_time,\n  a,\n  b\nFROM `org.example.ticks`\n"
NEW_QUERY = (
    "SELECT\n  event_time,\n  CAST(a AS BIGINT) AS a,\n  price * 2 AS c\nFROM `org.example.ticks`\n"
)


def set_transform(query: str) -> dict[str, Any]:
    return {
        "kind": "SetTransform",
        "inputs": [{"datasetRef": DID_TICKS, "alias": "org.example.ticks"}],
        "transform": {"kind": "Sql", "engine": "spark", "query": query},
    }


EVENT_TIME = Column("event_time", "TIMESTAMP", nullable=False)

TICKS = DatasetPlan(
    name="org.example.ticks",
    kind="Root",
    action=Action.UNCHANGED,
    manifest=Location("datasets/org.example.ticks.yaml"),
    dataset_id=DID_TICKS,
    downstream=("org.example.ticks.daily", "org.example.ticks.weekly"),
    pending=(Pending("polling-source", "polled on every run: new data may be ingested"),),
    changed_in_pr=False,
)
PRICES = DatasetPlan(
    name="org.example.prices",
    kind="Root",
    action=Action.CREATE,
    manifest=Location("datasets/org.example.prices.yaml"),
    events=(
        EventChange(
            kind="SetPollingSource",
            key="SetPollingSource",
            before=None,
            after=POLLING_SOURCE,
            change_class=ChangeClass.COMPATIBLE,
            reasons=("a new source",),
            schema=SchemaChange(
                before=None,
                after=(
                    Column("date", "TIMESTAMP"),
                    Column("symbol", "STRING"),
                    Column("price", "DECIMAL(18,4)"),
                ),
                added=("date", "symbol", "price"),
            ),
        ),
        EventChange(
            kind="SetInfo",
            key="SetInfo",
            before=None,
            after=INFO,
            change_class=ChangeClass.METADATA_ONLY,
            reasons=("SetInfo changes descriptive metadata only",),
        ),
        EventChange(
            kind="SetLicense",
            key="SetLicense",
            before=None,
            after=LICENSE,
            change_class=ChangeClass.METADATA_ONLY,
            reasons=("SetLicense changes descriptive metadata only",),
        ),
    ),
    change_class=ChangeClass.COMPATIBLE,
    changed_in_pr=True,
)
DAILY = DatasetPlan(
    name="org.example.ticks.daily",
    kind="Derivative",
    action=Action.UPDATE,
    manifest=Location("datasets/org.example.ticks.daily.yaml"),
    dataset_id=DID_DAILY,
    events=(
        EventChange(
            kind="SetTransform",
            key="SetTransform",
            before=set_transform(OLD_QUERY),
            after=set_transform(NEW_QUERY),
            change_class=ChangeClass.BREAKING,
            reasons=(
                "the query changed: the engine analyses it",
                "drops or renames columns: b",
                "retypes columns: a INT -> BIGINT",
            ),
            schema=SchemaChange(
                before=(EVENT_TIME, Column("a", "INT"), Column("b", "STRING")),
                after=(EVENT_TIME, Column("a", "BIGINT"), Column("c", "DOUBLE")),
                added=("c",),
                removed=("b",),
                retyped=(("a", "INT", "BIGINT"),),
            ),
        ),
    ),
    change_class=ChangeClass.BREAKING,
    inputs=("org.example.ticks",),
    downstream=("org.example.ticks.weekly",),
    affected_downstream=("org.example.ticks.weekly",),
    query=QueryCheck(
        dataset="org.example.ticks.daily",
        ok=True,
        output_schema=(EVENT_TIME, Column("a", "BIGINT"), Column("c", "DOUBLE")),
    ),
    changed_in_pr=True,
)
WEEKLY = DatasetPlan(
    name="org.example.ticks.weekly",
    kind="Derivative",
    action=Action.UNCHANGED,
    manifest=Location("datasets/org.example.ticks.weekly.yaml"),
    dataset_id=DID_WEEKLY,
    inputs=("org.example.ticks.daily",),
    changed_in_pr=False,
)
LEGACY = DatasetPlan(
    name="org.example.legacy", kind="Root", action=Action.ORPHANED, dataset_id=DID_LEGACY
)
PLAN = Plan(
    datasets=(TICKS, PRICES, DAILY, WEEKLY, LEGACY),
    verdicts=(
        Verdict(
            policy="license-required",
            severity=Severity.WARNING,
            message="no SetLicense: readers cannot tell how they may use the data",
            dataset="org.example.ticks.weekly",
            location=Location("datasets/org.example.ticks.weekly.yaml"),
        ),
        Verdict(
            policy="breaking-changes-need-override",
            severity=Severity.ERROR,
            message="breaking change without an override: drops b, retypes a",
            dataset="org.example.ticks.daily",
            location=Location("datasets/org.example.ticks.daily.yaml", 7, 7),
        ),
        Verdict(
            policy="no-orphans",
            severity=Severity.WARNING,
            message="1 chain has no manifest: org.example.legacy",
        ),
    ),
    problems=(
        Problem(
            message="unknown input org.example.missing",
            dataset="org.example.broken",
            location=Location("datasets/org.example.broken.yaml", 9, 11),
            field="content.metadata[0].inputs[0].datasetRef",
        ),
    ),
    base_ref="origin/main",
    engine_started=True,
    commit=COMMIT,
)

FAILED_QUERY = QueryCheck(
    dataset="org.example.ticks.daily",
    ok=False,
    error=(
        "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column with name `price` cannot be resolved.\n"
        "== SQL (line 4, position 3) ==\n"
        "  price * 2 AS c\n"
        "  ^^^^^"
    ),
    line=4,
)


def generated_query(factor: int) -> str:
    """A long query, so that each generated dataset's diff is large."""
    columns = [f"  col_{i} * {factor} AS col_{i}," for i in range(80)]
    return "\n".join(["SELECT", *columns, "  1 AS one", "FROM `org.example.ticks`"]) + "\n"


def generated_update(index: int) -> DatasetPlan:
    """A derivative whose query changes in every line."""
    return DatasetPlan(
        name=f"org.example.generated.d{index:03}",
        kind="Derivative",
        action=Action.UPDATE,
        dataset_id=DID_DAILY,
        events=(
            EventChange(
                kind="SetTransform",
                key="SetTransform",
                before=set_transform(generated_query(1)),
                after=set_transform(generated_query(2)),
                change_class=ChangeClass.NEEDS_VALIDATION,
                reasons=("the query changed: the engine analyses it",),
            ),
        ),
        change_class=ChangeClass.NEEDS_VALIDATION,
        inputs=("org.example.ticks",),
        changed_in_pr=True,
    )


def markdown_blocks(markdown: str) -> list[str]:
    """The comment's blocks, without the newline that ends the comment."""
    return markdown.removesuffix("\n").split("\n\n")


# JSON ----------------------------------------------------------------------------------


def test_json_plan_is_valid_against_the_plan_schema_with_format_checking() -> None:
    check = validator("plan.json")
    assert isinstance(check, Draft202012Validator)
    assert check.schema == json.loads((SCHEMA_DIR / "plan.json").read_text(encoding="utf-8"))
    assert check.format_checker is not None
    document = json.loads(render_json(PLAN))
    assert [e.message for e in check.iter_errors(document)] == []


def test_json_document_is_indented_by_two_with_format_version_first() -> None:
    text = render_json(PLAN)
    assert text.startswith('{\n  "formatVersion": 1,\n  "baseRef": "origin/main",\n')
    assert json.loads(text) == plan_to_dict(PLAN)
    assert list(plan_to_dict(PLAN)) == [
        "formatVersion",
        "baseRef",
        "commit",
        "engineStarted",
        "summary",
        "datasets",
        "verdicts",
        "problems",
    ]


def test_json_summary_counts_actions_pending_errors_and_gives_both_exit_codes() -> None:
    assert plan_to_dict(PLAN)["summary"] == {
        "actions": {
            "create": 1,
            "update": 1,
            "recreate": 0,
            "unchanged": 2,
            "orphaned": 1,
            "delete": 0,
        },
        "pendingData": 1,
        "errors": 2,
        "warnings": 2,
        "hasChanges": True,
        "hasErrors": True,
        "exitCode": {"default": 1, "detailed": 1},
    }


def test_json_exit_codes_are_two_for_changes_only_with_the_detailed_exit_code() -> None:
    changes = plan_to_dict(Plan(datasets=(PRICES,)))["summary"]
    nothing = plan_to_dict(Plan(datasets=(WEEKLY,)))["summary"]
    assert (changes["hasChanges"], changes["exitCode"]) == (True, {"default": 0, "detailed": 2})
    assert (nothing["hasChanges"], nothing["exitCode"]) == (False, {"default": 0, "detailed": 0})


def test_json_update_carries_events_before_and_after_schema_change_and_downstream() -> None:
    daily = plan_to_dict(PLAN)["datasets"][2]
    assert daily == {
        "name": "org.example.ticks.daily",
        "kind": "Derivative",
        "action": "update",
        "changeClass": "breaking",
        "changedInPr": True,
        "datasetId": DID_DAILY,
        "manifest": {"file": "datasets/org.example.ticks.daily.yaml"},
        "inputs": ["org.example.ticks"],
        "downstream": ["org.example.ticks.weekly"],
        "affectedDownstream": ["org.example.ticks.weekly"],
        "events": [
            {
                "kind": "SetTransform",
                "key": "SetTransform",
                "changeClass": "breaking",
                "reasons": [
                    "the query changed: the engine analyses it",
                    "drops or renames columns: b",
                    "retypes columns: a INT -> BIGINT",
                ],
                "before": set_transform(OLD_QUERY),
                "after": set_transform(NEW_QUERY),
                "schema": {
                    "before": [
                        {"name": "event_time", "type": "TIMESTAMP", "nullable": False},
                        {"name": "a", "type": "INT", "nullable": True},
                        {"name": "b", "type": "STRING", "nullable": True},
                    ],
                    "after": [
                        {"name": "event_time", "type": "TIMESTAMP", "nullable": False},
                        {"name": "a", "type": "BIGINT", "nullable": True},
                        {"name": "c", "type": "DOUBLE", "nullable": True},
                    ],
                    "added": ["c"],
                    "removed": ["b"],
                    "retyped": [{"column": "a", "before": "INT", "after": "BIGINT"}],
                    "nullability": [],
                },
            }
        ],
        "pending": [],
        "query": {
            "dataset": "org.example.ticks.daily",
            "ok": True,
            "outputSchema": [
                {"name": "event_time", "type": "TIMESTAMP", "nullable": False},
                {"name": "a", "type": "BIGINT", "nullable": True},
                {"name": "c", "type": "DOUBLE", "nullable": True},
            ],
        },
    }


def test_json_omits_absent_fields_but_keeps_the_null_before_of_a_new_event() -> None:
    prices, legacy = plan_to_dict(PLAN)["datasets"][1], plan_to_dict(PLAN)["datasets"][4]
    assert list(prices) == [
        "name",
        "kind",
        "action",
        "changeClass",
        "changedInPr",
        "manifest",
        "inputs",
        "downstream",
        "affectedDownstream",
        "events",
        "pending",
    ]
    assert prices["events"][1] == {
        "kind": "SetInfo",
        "key": "SetInfo",
        "changeClass": "metadata-only",
        "reasons": ["SetInfo changes descriptive metadata only"],
        "before": None,
        "after": INFO,
    }
    assert prices["events"][0]["schema"]["before"] is None
    assert legacy == {
        "name": "org.example.legacy",
        "kind": "Root",
        "action": "orphaned",
        "datasetId": DID_LEGACY,
        "inputs": [],
        "downstream": [],
        "affectedDownstream": [],
        "events": [],
        "pending": [],
    }


def test_json_verdicts_and_problems_keep_their_locations() -> None:
    document = plan_to_dict(PLAN)
    assert document["verdicts"] == [
        {
            "policy": "license-required",
            "severity": "warning",
            "message": "no SetLicense: readers cannot tell how they may use the data",
            "dataset": "org.example.ticks.weekly",
            "location": {"file": "datasets/org.example.ticks.weekly.yaml"},
        },
        {
            "policy": "breaking-changes-need-override",
            "severity": "error",
            "message": "breaking change without an override: drops b, retypes a",
            "dataset": "org.example.ticks.daily",
            "location": {"file": "datasets/org.example.ticks.daily.yaml", "line": 7, "column": 7},
        },
        {
            "policy": "no-orphans",
            "severity": "warning",
            "message": "1 chain has no manifest: org.example.legacy",
        },
    ]
    assert document["problems"] == [
        {
            "message": "unknown input org.example.missing",
            "dataset": "org.example.broken",
            "location": {"file": "datasets/org.example.broken.yaml", "line": 9, "column": 11},
            "field": "content.metadata[0].inputs[0].datasetRef",
            "severity": "error",
        }
    ]


def test_json_failed_query_keeps_the_engine_error_and_its_line() -> None:
    plan = Plan(datasets=(dataclasses.replace(DAILY, query=FAILED_QUERY),))
    document = plan_to_dict(plan)
    assert document["datasets"][0]["query"] == {
        "dataset": "org.example.ticks.daily",
        "ok": False,
        "error": FAILED_QUERY.error,
        "line": 4,
    }
    assert list(validator("plan.json").iter_errors(document)) == []


def test_plan_schema_checks_events_against_the_odf_event_schemas() -> None:
    document = plan_to_dict(PLAN)
    bad = copy.deepcopy(document)
    bad["datasets"][2]["events"][0]["after"] = {"kind": "SetTransform", "query": "SELECT 1"}
    errors = list(validator("plan.json").iter_errors(bad))
    assert [(e.json_path, e.validator) for e in errors] == [
        ("$.datasets[2].events[0].after", "oneOf")
    ]


def test_plan_schema_rejects_unknown_keys_and_unknown_actions() -> None:
    bad = copy.deepcopy(plan_to_dict(PLAN))
    bad["datasets"][0]["colour"] = "green"
    bad["datasets"][1]["action"] = "replace"
    bad["summary"]["exitCode"]["detailed"] = 3
    errors = sorted(validator("plan.json").iter_errors(bad), key=lambda e: e.json_path)
    assert [(e.json_path, e.validator) for e in errors] == [
        ("$.datasets[0]", "additionalProperties"),
        ("$.datasets[1].action", "enum"),
        ("$.summary.exitCode.detailed", "enum"),
    ]


# Text ----------------------------------------------------------------------------------

EXPECTED_TEXT = """\
= org.example.ticks (Root) unchanged
    pending data: polling-source: polled on every run: new data may be ingested

+ org.example.prices (Root, compatible) will be created (changed in this PR)
    + SetPollingSource (compatible)
        # a new source
        + kind: SetPollingSource
        + fetch:
        +   kind: Url
        +   url: https://example.org/prices.csv
        + read:
        +   kind: Csv
        +   header: true
        +   schema:
        +   - date TIMESTAMP
        +   - symbol STRING
        +   - price DECIMAL(18,4)
        + merge:
        +   kind: Ledger
        +   primaryKey:
        +   - date
        +   - symbol
        schema:
            column  before  after
          + date            TIMESTAMP      added
          + symbol          STRING         added
          + price           DECIMAL(18,4)  added
    + SetInfo (metadata-only)
        # SetInfo changes descriptive metadata only
        + kind: SetInfo
        + description: Daily closing prices
        + keywords:
        + - finance
        + - prices
    + SetLicense (metadata-only)
        # SetLicense changes descriptive metadata only
        + kind: SetLicense
        + shortName: CC-BY-4.0
        + spdxId: CC-BY-4.0
        + name: Creative Commons Attribution 4.0 International
        + websiteUrl: https://creativecommons.org/licenses/by/4.0/

~ org.example.ticks.daily (Derivative, breaking) will be updated (changed in this PR)
    ~ SetTransform (breaking)
        # the query changed: the engine analyses it
        # drops or renames columns: b
        # retypes columns: a INT -> BIGINT
        @@ -8,6 +8,6 @@
            query: |
              SELECT
                event_time,
        -       a,
        -       b
        +       CAST(a AS BIGINT) AS a,
        +       price * 2 AS c
              FROM `org.example.ticks`
        schema:
            column      before              after
            event_time  TIMESTAMP NOT NULL  TIMESTAMP NOT NULL
          ~ a           INT                 BIGINT              retyped
          + c                               DOUBLE              added
          - b           STRING                                  removed
    query check: ok; output columns: event_time TIMESTAMP NOT NULL, a BIGINT, c DOUBLE
    downstream: org.example.ticks.weekly (affected)

= org.example.ticks.weekly (Derivative) unchanged
? org.example.legacy (Root) orphaned: no valid manifest, left untouched

Policy errors:
  [breaking-changes-need-override] datasets/org.example.ticks.daily.yaml:7:7: org.example.ticks.daily: breaking change without an override: drops b, retypes a
Policy warnings:
  [license-required] datasets/org.example.ticks.weekly.yaml: org.example.ticks.weekly: no SetLicense: readers cannot tell how they may use the data
  [no-orphans] 1 chain has no manifest: org.example.legacy

Problems:
  datasets/org.example.broken.yaml:9:11: org.example.broken: content.metadata[0].inputs[0].datasetRef: unknown input org.example.missing

Plan: 1 to create, 1 to update, 2 unchanged, 1 orphaned; 1 with pending data. 2 errors, 2 warnings.
"""


def test_text_renders_the_whole_plan_like_terraform_plan() -> None:
    assert render_text(PLAN, color=False) == EXPECTED_TEXT


def test_text_headers_mark_each_action_and_unchanged_datasets_take_one_line() -> None:
    deleted = dataclasses.replace(LEGACY, action=Action.DELETE)
    plan = Plan(datasets=(WEEKLY, deleted, dataclasses.replace(WEEKLY, name="org.example.z")))
    assert render_text(plan, color=False).splitlines() == [
        "= org.example.ticks.weekly (Derivative) unchanged",
        "- org.example.legacy (Root) will be deleted",
        "= org.example.z (Derivative) unchanged",
        "",
        "Plan: 2 unchanged, 1 to delete. 0 errors, 0 warnings.",
    ]


def test_text_shows_a_failed_query_with_the_engine_error_and_its_line() -> None:
    plan = Plan(datasets=(dataclasses.replace(DAILY, query=FAILED_QUERY),))
    lines = render_text(plan, color=False).splitlines()
    start = lines.index(
        "    query check: failed at line 4: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column with name `price` cannot be resolved."
    )
    assert lines[start + 1 : start + 4] == [
        "        == SQL (line 4, position 3) ==",
        "          price * 2 AS c",
        "          ^^^^^",
    ]


def test_every_format_gives_each_reader_of_an_unreadable_chain_one_line() -> None:
    """Not planned (its inputs' chains cannot be read), a reader is counted apart from
    them and named with them, in dependency order, and its JSON is a valid plan's."""
    plan = Plan(
        datasets=(WEEKLY,),
        unreadable=("org.example.a", "org.example.b"),
        blocked=(
            Blocked("org.example.c", ("org.example.a",)),
            Blocked("org.example.d", ("org.example.a", "org.example.b")),
        ),
    )
    assert render_text(plan, color=False).splitlines() == [
        "= org.example.ticks.weekly (Derivative) unchanged",
        "! org.example.c not planned: it reads org.example.a, whose chain cannot be read",
        "! org.example.d not planned: it reads org.example.a, org.example.b, whose chains"
        " cannot be read",
        "",
        "Plan: 1 unchanged, 2 not planned (chain cannot be read), 2 not planned (reads a chain"
        " that cannot be read). 0 errors, 0 warnings.",
    ]
    lines = render_markdown(plan).splitlines()
    assert lines[2] == (
        "no errors · 1 unchanged · 2 not planned (chain cannot be read) · 2 not planned"
        " (reads a chain that cannot be read)"
    )
    assert lines[lines.index("### Datasets") :] == [
        "### Datasets",
        "",
        "_No dataset changes: 1 unchanged dataset._",
        "",
        "- `org.example.c` not planned: it reads `org.example.a`, whose chain cannot be read",
        "- `org.example.d` not planned: it reads `org.example.a`, `org.example.b`, whose"
        " chains cannot be read",
    ]
    document = plan_to_dict(plan)
    assert list(validator("plan.json").iter_errors(document)) == []
    assert document["blocked"] == [
        {"name": "org.example.c", "inputs": ["org.example.a"]},
        {"name": "org.example.d", "inputs": ["org.example.a", "org.example.b"]},
    ]


def test_text_says_so_when_the_plan_has_no_datasets() -> None:
    assert (
        render_text(Plan(datasets=()), color=False) == "Plan: no datasets. 0 errors, 0 warnings.\n"
    )


def test_text_without_color_has_no_escape_codes() -> None:
    assert "\x1b" not in render_text(PLAN, color=False)


def test_text_with_color_paints_creates_green_updates_yellow_removals_red_unchanged_dim() -> None:
    lines = render_text(PLAN, color=True).splitlines()
    assert lines[0] == "\x1b[2m= org.example.ticks (Root) unchanged\x1b[0m"
    assert (
        lines[3]
        == "\x1b[32m+ org.example.prices (Root, compatible) will be created (changed in this PR)\x1b[0m"
    )
    assert (
        "\x1b[33m~ org.example.ticks.daily (Derivative, breaking) will be updated (changed in this PR)\x1b[0m"
        in lines
    )
    assert "\x1b[31m        -       a,\x1b[0m" in lines
    assert "\x1b[32m        +       CAST(a AS BIGINT) AS a,\x1b[0m" in lines
    assert "\x1b[31mPolicy errors:\x1b[0m" in lines
    assert "\x1b[31mProblems:\x1b[0m" in lines
    assert "? org.example.legacy (Root) orphaned: no valid manifest, left untouched" in lines


def test_text_colours_change_no_character_of_the_layout() -> None:
    assert re.sub(r"\x1b\[[0-9;]*m", "", render_text(PLAN, color=True)) == EXPECTED_TEXT


# Markdown ------------------------------------------------------------------------------

EXPECTED_SUMMARY = (
    "**2 errors** · **1 breaking change** (`org.example.ticks.daily`) · 2 warnings"
    " · 1 to create · 1 to update · 2 unchanged · 1 orphaned · 1 with pending data"
)

EXPECTED_TABLE = """\
| Dataset | Action | Class | Notes |
| --- | --- | --- | --- |
| `org.example.prices` | create | compatible |  |
| `org.example.ticks.daily` | update | **breaking** | **1 error** · 1 downstream (1 affected) |
| `org.example.legacy` | orphaned |  |  |

_Not listed: 2 unchanged datasets (1 with a source that may have new data)._"""

EXPECTED_OVERVIEW = f"""\
## Reconcile plan

{EXPECTED_SUMMARY}

Commit {COMMIT}, compared with `origin/main`. Changed queries were analysed by the engine.

### Datasets

{EXPECTED_TABLE}

### Policy verdicts

- **error** `breaking-changes-need-override` `datasets/org.example.ticks.daily.yaml:7:7` `org.example.ticks.daily`: breaking change without an override: drops b, retypes a
- warning `license-required` `datasets/org.example.ticks.weekly.yaml` `org.example.ticks.weekly`: no SetLicense: readers cannot tell how they may use the data
- warning `no-orphans`: 1 chain has no manifest: org.example.legacy

### Problems

- `datasets/org.example.broken.yaml:9:11` `org.example.broken` field `content.metadata[0].inputs[0].datasetRef`: unknown input org.example.missing
"""

EXPECTED_GRAPH = """\
### Affected datasets

```mermaid
graph LR
  d1["org.example.prices"]
  d2["org.example.ticks.daily"]
  d3["org.example.ticks.weekly"]
  d2 --> d3
  classDef create fill:#dafbe1,stroke:#1a7f37
  classDef breaking fill:#fff8c5,stroke:#cf222e,stroke-width:3px
  classDef affected fill:#fff1e5,stroke:#bc4c00
  class d1 create
  class d2 breaking
  class d3 affected
```

**Legend:** 🟩 created · 🟨 with a thick red border: breaking change · 🟧 downstream, reached by a schema or breaking change · arrows run from an input to the dataset that reads it
"""

EXPECTED_DAILY_SECTION = """\
<details><summary><code>org.example.ticks.daily</code> (Derivative): update, breaking, changed in this PR</summary>

**Manifest:** `datasets/org.example.ticks.daily.yaml` · **Inputs:** `org.example.ticks`

#### `SetTransform` (breaking)

- the query changed: the engine analyses it
- drops or renames columns: b
- retypes columns: a INT -> BIGINT

```diff
@@ -8,6 +8,6 @@
    query: |
      SELECT
        event_time,
-       a,
-       b
+       CAST(a AS BIGINT) AS a,
+       price * 2 AS c
      FROM `org.example.ticks`
```

| Column | Before | After | Change |
| --- | --- | --- | --- |
| `event_time` | `TIMESTAMP NOT NULL` | `TIMESTAMP NOT NULL` |  |
| `a` | `INT` | `BIGINT` | retyped |
| `c` |  | `DOUBLE` | added |
| `b` | `STRING` |  | removed |

**Query check:** ok; output columns: `event_time TIMESTAMP NOT NULL`, `a BIGINT`, `c DOUBLE`.

**Downstream:** `org.example.ticks.weekly` (affected)

</details>
"""

EXPECTED_PRICES_SECTION = """\
<details><summary><code>org.example.prices</code> (Root): create, compatible, changed in this PR</summary>

**Manifest:** `datasets/org.example.prices.yaml`

#### `SetPollingSource` (compatible)

- a new source

```diff
+ kind: SetPollingSource
+ fetch:
+   kind: Url
+   url: https://example.org/prices.csv
+ read:
+   kind: Csv
+   header: true
+   schema:
+   - date TIMESTAMP
+   - symbol STRING
+   - price DECIMAL(18,4)
+ merge:
+   kind: Ledger
+   primaryKey:
+   - date
+   - symbol
```

| Column | Before | After | Change |
| --- | --- | --- | --- |
| `date` |  | `TIMESTAMP` | added |
| `symbol` |  | `STRING` | added |
| `price` |  | `DECIMAL(18,4)` | added |

#### `SetInfo` (metadata-only)

- SetInfo changes descriptive metadata only

```diff
+ kind: SetInfo
+ description: Daily closing prices
+ keywords:
+ - finance
+ - prices
```

#### `SetLicense` (metadata-only)

- SetLicense changes descriptive metadata only

```diff
+ kind: SetLicense
+ shortName: CC-BY-4.0
+ spdxId: CC-BY-4.0
+ name: Creative Commons Attribution 4.0 International
+ websiteUrl: https://creativecommons.org/licenses/by/4.0/
```

</details>
"""


def test_markdown_is_overview_graph_then_a_details_section_per_changed_dataset() -> None:
    assert render_markdown(PLAN) == "\n".join(
        [
            EXPECTED_OVERVIEW,
            EXPECTED_GRAPH,
            "### Changes\n",
            EXPECTED_PRICES_SECTION,
            EXPECTED_DAILY_SECTION,
        ]
    )


def test_markdown_summary_line_leads_with_errors_and_names_the_breaking_changes() -> None:
    assert markdown_blocks(render_markdown(PLAN))[1] == EXPECTED_SUMMARY


def test_markdown_summary_counts_the_actions_in_the_text_plans_order() -> None:
    """The comment said "1 to update · 1 to create" where the text plan's summary says
    "1 to create, 1 to update"."""
    text = render_text(PLAN, color=False).splitlines()[-1]
    assert text.startswith("Plan: 1 to create, 1 to update, 2 unchanged, 1 orphaned;")
    assert markdown_blocks(render_markdown(PLAN))[1].endswith(
        " · 1 to create · 1 to update · 2 unchanged · 1 orphaned · 1 with pending data"
    )


def test_markdown_summary_line_says_no_errors_and_names_three_breaking_then_counts() -> None:
    breaking = [
        dataclasses.replace(DAILY, name=f"org.example.b{i}", downstream=(), query=None)
        for i in range(5)
    ]
    plan = Plan(datasets=(*breaking, WEEKLY))
    assert markdown_blocks(render_markdown(plan))[1] == (
        "no errors · **5 breaking changes** (`org.example.b0`, `org.example.b1`,"
        " `org.example.b2` and 2 more) · 5 to update · 1 unchanged"
    )


def test_markdown_summary_line_counts_a_failed_query_as_its_one_problem() -> None:
    # The builder makes a failed check a Problem; renderers count problems alone, so the
    # check and its problem are one error, not two.
    problem = Problem("query check failed: …", dataset=PRICES.name)
    plan = Plan(datasets=(dataclasses.replace(PRICES, query=FAILED_QUERY),), problems=(problem,))
    assert markdown_blocks(render_markdown(plan))[1] == "**1 error** · 1 to create"


def test_markdown_table_lists_only_datasets_that_change_or_fail_and_counts_the_rest() -> None:
    blocks = markdown_blocks(render_markdown(PLAN))
    assert "\n\n".join(datasets_table(blocks)) == EXPECTED_TABLE


def datasets_table(blocks: list[str]) -> list[str]:
    """The Datasets section's table and the line under it."""
    start = blocks.index("### Datasets")
    return blocks[start + 1 : start + 3]


def test_markdown_table_lists_an_unchanged_dataset_that_fails() -> None:
    failing = Verdict("naming", Severity.ERROR, "bad name", dataset="org.example.ticks.weekly")
    plan = Plan(datasets=(TICKS, WEEKLY), verdicts=(failing,))
    blocks = markdown_blocks(render_markdown(plan))
    assert datasets_table(blocks) == [
        "| Dataset | Action | Class | Notes |\n"
        "| --- | --- | --- | --- |\n"
        "| `org.example.ticks.weekly` | unchanged |  | **1 error** |",
        "_Not listed: 1 unchanged dataset (1 with a source that may have new data)._",
    ]


def test_markdown_lists_an_unchanged_dataset_with_data_waiting_and_shows_it() -> None:
    """A pull request that only adds a source file changes no manifest: the reviewer still
    sees which datasets take it in, where a source that only may have data is counted."""
    slices = Pending(
        "unconsumed-inputs", "org.example.ticks.daily: offsets 10..19 not yet consumed"
    )
    weekly = dataclasses.replace(WEEKLY, pending=(slices,))
    blocks = markdown_blocks(render_markdown(Plan(datasets=(TICKS, weekly))))
    assert datasets_table(blocks) == [
        "| Dataset | Action | Class | Notes |\n"
        "| --- | --- | --- | --- |\n"
        "| `org.example.ticks.weekly` | unchanged |  | pending data |",
        "_Not listed: 1 unchanged dataset (1 with a source that may have new data)._",
    ]
    details = blocks[blocks.index("### Changes") + 1 :]
    assert details[0] == (
        "<details><summary><code>org.example.ticks.weekly</code> (Derivative): unchanged</summary>"
    )
    assert details[2:] == [
        "**Pending data:**",
        "- unconsumed-inputs: org.example.ticks.daily: offsets 10..19 not yet consumed",
        "</details>",
    ]
    assert not any("org.example.ticks</code>" in block for block in details)


def test_markdown_of_a_plan_without_changes_says_so_instead_of_a_table() -> None:
    blocks = markdown_blocks(render_markdown(Plan(datasets=(TICKS, WEEKLY))))
    assert blocks[1:4] == [
        "no errors · 2 unchanged · 1 with pending data",
        "### Datasets",
        "_No dataset changes: 2 unchanged datasets (1 with a source that may have new data)._",
    ]


def test_markdown_notes_a_change_the_pull_request_did_not_make() -> None:
    plan = Plan(datasets=(dataclasses.replace(PRICES, changed_in_pr=False),))
    assert "| `org.example.prices` | create | compatible | not changed in this PR |" in (
        render_markdown(plan)
    )


def test_markdown_names_the_commit_alone_or_the_base_alone() -> None:
    with_commit = Plan(datasets=(), commit=COMMIT)
    with_base = Plan(datasets=(), base_ref="origin/main")
    assert markdown_blocks(render_markdown(with_commit))[2] == f"Commit {COMMIT}."
    assert markdown_blocks(render_markdown(with_base))[2] == "Compared with `origin/main`."
    assert markdown_blocks(render_markdown(Plan(datasets=())))[1:3] == [
        "no errors · no datasets",
        "### Datasets",
    ]


def test_markdown_legend_explains_only_the_styles_the_graph_uses() -> None:
    deleted = dataclasses.replace(LEGACY, action=Action.DELETE)
    blocks = markdown_blocks(render_markdown(Plan(datasets=(deleted,))))
    assert blocks[blocks.index("### Affected datasets") + 2] == "**Legend:** 🟥 deleted"


def test_markdown_graph_links_inputs_to_readers_among_changed_and_downstream_only() -> None:
    markdown = render_markdown(PLAN)
    assert EXPECTED_GRAPH in markdown
    assert '["org.example.ticks"]' not in markdown  # an unchanged input: outside the picture


def test_markdown_failed_query_shows_the_engine_error_in_a_code_block() -> None:
    plan = Plan(datasets=(dataclasses.replace(DAILY, query=FAILED_QUERY),))
    markdown = render_markdown(plan)
    assert (
        "**Query check:** failed at line 4:\n\n"
        "```text\n"
        "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column with name `price` cannot be resolved.\n"
        "== SQL (line 4, position 3) ==\n"
        "  price * 2 AS c\n"
        "  ^^^^^\n"
        "```"
    ) in markdown


def test_markdown_escapes_pipes_and_newlines_in_cells_and_backticks_in_code() -> None:
    weird = Verdict(
        policy="naming",
        severity=Severity.ERROR,
        message="use a | b\nnot a || b",
        dataset="org.example.ticks",
    )
    schema = SchemaChange(before=None, after=(Column("a`b", "INT"),), added=("a`b",))
    event = dataclasses.replace(
        DAILY.events[0], after=set_transform("SELECT '```' AS fence"), schema=schema
    )
    plan = Plan(
        datasets=(dataclasses.replace(DAILY, events=(event,), query=None),), verdicts=(weird,)
    )
    blocks = markdown_blocks(render_markdown(plan))
    assert blocks[blocks.index("### Policy verdicts") + 1] == (
        "- **error** `naming` `org.example.ticks`: use a \\| b<br>not a \\|\\| b"
    )
    schema_table = next(b for b in blocks if b.startswith("| Column |"))
    assert schema_table.splitlines()[2] == "| ``a`b`` |  | `INT` | added |"
    diff = next(b for b in blocks if b.startswith("````diff"))
    assert diff.splitlines()[-3:] == [
        "-     FROM `org.example.ticks`",
        "+   query: SELECT '```' AS fence",
        "````",
    ]


def test_markdown_folds_the_diffs_of_the_largest_section_first() -> None:
    limit = len(render_markdown(PLAN)) - 1
    blocks = markdown_blocks(render_markdown(PLAN, limit))
    assert len("\n\n".join(blocks)) <= limit
    assert [b for b in blocks if b.startswith("_diff omitted")] == [
        "_diff omitted: 16 lines; run `reconcile --plan` locally_",
        "_diff omitted: 5 lines; run `reconcile --plan` locally_",
        "_diff omitted: 5 lines; run `reconcile --plan` locally_",
    ]
    assert EXPECTED_DAILY_SECTION.rstrip("\n") in "\n\n".join(blocks)


def test_markdown_of_300_large_diffs_fits_a_github_comment_and_names_every_dataset() -> None:
    plan = Plan(datasets=tuple(generated_update(i) for i in range(300)))
    markdown = render_markdown(plan)
    assert len(markdown) <= 65536
    lines = markdown.splitlines()
    rows = lines[lines.index("| --- | --- | --- | --- |") + 1 :][:300]
    assert rows == [
        f"| `org.example.generated.d{i:03}` | update | needs-validation |  |" for i in range(300)
    ]
    kept = [line for line in lines if line.startswith("<details><summary>")]
    assert kept == [
        f"<details><summary><code>org.example.generated.d{i:03}</code> (Derivative): update, needs-validation, changed in this PR</summary>"
        for i in range(199, 300)
    ]
    assert markdown.count("_diff omitted: 166 lines; run `reconcile --plan` locally_") == 101
    omitted = ", ".join(f"`org.example.generated.d{i:03}`" for i in range(50))
    assert lines[-1] == (
        f"_Details omitted to fit the comment; run `reconcile --plan` locally: {omitted}"
        " and 149 more datasets._"
    )


def test_markdown_of_5000_changed_datasets_fits_a_github_comment() -> None:
    """Every omitted section was named at the end: 5,000 names alone made 129,649
    characters, which GitHub refuses to post."""
    plan = Plan(datasets=tuple(generated_update(i) for i in range(5000)))
    markdown = render_markdown(plan)
    assert len(markdown) <= 65536
    assert markdown.splitlines()[-1].endswith(" and 4,950 more datasets._")


WHOLE_PLAN = "left out to fit the comment: the whole plan is the run's `plan` artifact (`reconcile show plan.json`)"


def test_markdown_with_a_tiny_limit_keeps_the_summary_and_says_what_it_cut() -> None:
    """Past every fold, the overview's table and lists are cut; each cut says how many
    it left out and where they are. The summary line, which counts them, stays."""
    blocks = markdown_blocks(render_markdown(PLAN, limit=100))
    assert blocks[: blocks.index("### Datasets") + 1] == markdown_blocks(EXPECTED_OVERVIEW)[:4]
    assert blocks[blocks.index("### Datasets") + 1 :] == [
        f"_3 changed datasets, {WHOLE_PLAN}_",
        "_Not listed: 2 unchanged datasets (1 with a source that may have new data)._",
        "### Policy verdicts",
        f"- _3 verdicts, {WHOLE_PLAN}_",
        "### Problems",
        f"- _1 problem, {WHOLE_PLAN}_",
        "### Affected datasets",
        "_Graph of 3 datasets omitted to fit the comment._",
        "### Changes",
        "_Details omitted to fit the comment; run `reconcile --plan` locally: `org.example.prices`, `org.example.ticks.daily`._",
    ]


def test_markdown_of_a_thousand_new_datasets_with_verdicts_fits_a_github_comment() -> None:
    """Each dataset's row and verdict alone pass GitHub's limit: the comment keeps as
    many of each as fit, errors first, and says how many it left out."""
    datasets = tuple(
        DatasetPlan(name=f"org.example.new.d{i:04}", kind="Root", action=Action.CREATE)
        for i in range(1000)
    )
    verdicts = tuple(
        Verdict(
            policy="info-recommended",
            severity=Severity.WARNING if i else Severity.ERROR,
            message="no SetInfo: describe the dataset for its readers " + "x" * 100,
            dataset=f"org.example.new.d{i:04}",
        )
        for i in range(1000)
    )
    markdown = render_markdown(Plan(datasets=datasets, verdicts=verdicts))
    assert 60000 < len(markdown) <= 65536
    blocks = markdown_blocks(markdown)
    rows = blocks[blocks.index("### Datasets") + 1].splitlines()[2:]
    cut = len(rows)
    assert rows[0] == "| `org.example.new.d0000` | create |  | **1 error** |"
    assert blocks[blocks.index("### Datasets") + 2] == (
        f"_and {1000 - cut:,} more changed datasets, {WHOLE_PLAN}_"
    )
    listed = blocks[blocks.index("### Policy verdicts") + 1].splitlines()
    assert listed[0].startswith("- **error** `info-recommended` `org.example.new.d0000`: ")
    assert listed[-1] == f"- _and {1000 - cut:,} more verdicts, {WHOLE_PLAN}_"
    assert len(listed) == cut + 1
    assert blocks[1].startswith("**1 error** · 999 warnings · 1,000 to create")


# Readability: relative paths, inputs by name --------------------------------------------

ROOT = "/home/runner/work/data/data"


def absolute(location: Location | None) -> Location | None:
    return (
        None if location is None else dataclasses.replace(location, file=f"{ROOT}/{location.file}")
    )


ABSOLUTE_PLAN = dataclasses.replace(
    PLAN,
    root=ROOT,
    datasets=tuple(dataclasses.replace(d, manifest=absolute(d.manifest)) for d in PLAN.datasets),
    verdicts=tuple(dataclasses.replace(v, location=absolute(v.location)) for v in PLAN.verdicts),
    problems=tuple(dataclasses.replace(p, location=absolute(p.location)) for p in PLAN.problems),
)


def test_every_renderer_shows_paths_under_the_root_relative_to_it() -> None:
    assert render_markdown(ABSOLUTE_PLAN) == render_markdown(PLAN)
    assert render_text(ABSOLUTE_PLAN, color=False) == EXPECTED_TEXT
    assert plan_to_dict(ABSOLUTE_PLAN) == plan_to_dict(PLAN)


def test_a_path_outside_the_root_is_kept_as_given() -> None:
    elsewhere = Problem("not read: a link out of the repository", location=Location("/etc/x.yaml"))
    plan = Plan(datasets=(), problems=(elsewhere,), root=ROOT)
    assert markdown_blocks(render_markdown(plan))[-1] == (
        "- `/etc/x.yaml`: not read: a link out of the repository"
    )


def test_a_message_names_files_under_the_root_relative_to_it_and_no_other_path() -> None:
    """A message's path under the root is shown relative to it; a path whose middle only
    spells the root (``/mnt`` + the root) was cut to ``/mnt`` + the rest."""
    message = f"reads {ROOT}/sources/a.csv, '{ROOT}/b.csv' and /mnt{ROOT}/c.csv"
    plan = Plan(datasets=(), problems=(Problem(message),), root=ROOT)
    assert plan_to_dict(plan)["problems"][0]["message"] == (
        f"reads sources/a.csv, 'b.csv' and /mnt{ROOT}/c.csv"
    )


def test_a_pull_requests_file_names_cannot_put_html_into_the_comment() -> None:
    """A manifest named ``x\\n<!--.yaml`` opened an HTML comment that hid the rest of
    the plan; a source file named ``a<img src=x>.csv`` was rendered as an image."""
    hidden = Problem("file holds no YAML document", location=Location("datasets/x\n<!--.yaml"))
    files = Pending("new-files", "1 new file: a<img src=x>.csv & b`<i>`.csv\nnext")
    weekly = dataclasses.replace(WEEKLY, pending=(files,))
    markdown = render_markdown(Plan(datasets=(TICKS, weekly), problems=(hidden,), root=ROOT))
    lines = markdown.splitlines()
    assert [line for line in lines if "<!--" in line and not line.startswith("- `")] == (
        [line for line in lines if line == "<!-- reconcile-plan -->"]
    )
    assert "<img" not in markdown
    assert "- `datasets/x\\n<!--.yaml`: file holds no YAML document" in markdown
    assert "- new-files: 1 new file: a&lt;img src=x>.csv &amp; b`<i>`.csv\\nnext" in markdown


def test_a_carriage_return_in_a_file_name_cannot_start_a_line_of_the_comment() -> None:
    """CommonMark ends a line at a lone ``\\r`` too: a source file named with them put a
    heading and a quote of the pull request's wording into the plan's comment."""
    name = "o-10\r\r## Reconcile plan: 0 errors\r\r> Approved by policy bot.csv"
    files = Pending("new-files", f"1 new file: {name}")
    weekly = dataclasses.replace(WEEKLY, pending=(files,))
    markdown = render_markdown(Plan(datasets=(TICKS, weekly), root=ROOT))
    assert "\r" not in markdown
    assert (
        "- new-files: 1 new file: o-10\\r\\r## Reconcile plan: 0 errors\\r\\r> Approved by"
        " policy bot.csv"
    ) in markdown.splitlines()  # shown, not taken: a <br> still made a line of its own


def test_control_characters_in_a_file_name_are_shown_as_escapes() -> None:
    """A source file named with ESC sequences cleared the reviewer's terminal, set its
    title and printed a plan summary of the pull request's wording; BEL rang, and a
    BiDi override reordered the line."""
    name = "o-1\x1b]0;pwned\x07\x1b[2J\x1b[32mPlan: 0 to change.\x1b[0m\u202egpj.csv"
    files = Pending("new-files", f"1 new file: {name}")
    weekly = dataclasses.replace(WEEKLY, pending=(files,))
    plan = Plan(datasets=(TICKS, weekly), root=ROOT)
    shown = (
        "1 new file: o-1\\x1b]0;pwned\\x07\\x1b[2J\\x1b[32mPlan: 0 to change.\\x1b[0m\\u202egpj.csv"
    )
    for text in (render_text(plan, color=True), render_markdown(plan)):
        assert "\x07" not in text and "\u202e" not in text
        assert shown in text.replace("\\[", "[").replace("\\]", "]")
    assert "\x1b" not in render_text(plan, color=False)
    assert render_text(plan, color=True).count("\x1b[") == render_text(
        dataclasses.replace(plan, datasets=(TICKS, WEEKLY)), color=True
    ).count("\x1b[")  # the plan's own colours only


def test_a_line_break_in_a_file_name_cannot_start_a_line_of_the_text_plan() -> None:
    """Journey 37: a source file named ``o-2\\nPlan: fake…`` printed a line of its own that
    read as the plan's summary; U+2028 and a zero-width space went out raw too."""
    name = "o-2\nPlan: 0 to change. 0 errors\u2028x\u200b.csv"
    files = Pending("new-files", f"1 new file: {name}")
    weekly = dataclasses.replace(WEEKLY, pending=(files,))
    text = render_text(Plan(datasets=(TICKS, weekly), root=ROOT), color=False)
    assert [line for line in text.splitlines() if "Plan: 0 to change" in line] == [
        "    pending data: new-files: 1 new file: o-2\\nPlan: 0 to change. 0 errors\\u2028x\\u200b.csv"
    ]
    assert (
        text.count("\n")
        == render_text(Plan(datasets=(TICKS, WEEKLY), root=ROOT), color=False).count("\n") + 1
    )  # the pending line itself, and no other


def test_a_run_shows_a_cause_s_control_characters_as_escapes() -> None:
    failed = Outcome("org.example.a", Status.FAILED, message="ReadError: sources/a\x1b[2J.csv")
    assert describe(failed) == "failed: ReadError: sources/a\\x1b[2J.csv"


def test_json_names_the_commit_planned() -> None:
    document = plan_to_dict(PLAN)
    assert document["commit"] == COMMIT
    assert "root" not in plan_to_dict(ABSOLUTE_PLAN)


def test_markdown_and_text_show_input_ids_of_the_chain_by_name_so_only_real_changes_diff() -> None:
    renamed = dataclasses.replace(
        DAILY.events[0],
        before=set_transform(OLD_QUERY),  # the chain's form: inputs by did:odf id
        after={**set_transform(NEW_QUERY), "inputs": [{"datasetRef": "org.example.ticks"}]},
    )
    plan = Plan(datasets=(TICKS, dataclasses.replace(DAILY, events=(renamed,), query=None)))
    diff = next(b for b in markdown_blocks(render_markdown(plan)) if b.startswith("```diff"))
    assert diff.splitlines()[:7] == [
        "```diff",
        "@@ -1,13 +1,12 @@",
        "  kind: SetTransform",
        "  inputs:",
        "  - datasetRef: org.example.ticks",
        "-   alias: org.example.ticks",
        "  transform:",
    ]
    assert DID_TICKS not in render_text(plan, color=False)


def test_an_unknown_input_id_stays_an_id() -> None:
    new_transform = dataclasses.replace(DAILY.events[0], before=None, schema=None)
    plan = Plan(datasets=(dataclasses.replace(DAILY, events=(new_transform,), query=None),))
    diff = next(b for b in markdown_blocks(render_markdown(plan)) if b.startswith("```diff"))
    assert diff.splitlines()[2:4] == ["+ inputs:", f"+ - datasetRef: {DID_TICKS}"]


def test_a_problem_of_a_whole_file_has_no_empty_field_in_text() -> None:
    plan = Plan(
        datasets=(),
        problems=(
            Problem("file holds no YAML document", location=Location("d/e.yaml", 1, 1), field=""),
        ),
    )
    assert (
        "  d/e.yaml:1:1: file holds no YAML document" in render_text(plan, color=False).splitlines()
    )


def test_a_pull_requests_text_cannot_format_link_or_mention_in_the_comment() -> None:
    """A manifest value in a message made bold or struck text, a link to anywhere (bare
    addresses too), or a mention that notified a user or team; in a code span it stays
    as written."""
    files = Pending(
        "new-files",
        "1 new file: **x** [y](https://e.example) @org/team a@b.c `@z *` ~~s~~ _u_ www.e.example",
    )
    weekly = dataclasses.replace(WEEKLY, pending=(files,))
    markdown = render_markdown(Plan(datasets=(TICKS, weekly), problems=(), root=ROOT))
    assert (
        "- new-files: 1 new file: \\*\\*x\\*\\* \\[y\\](h&#8203;ttps://e.example)"
        " @&#8203;org/team a@b.c `@z *` \\~\\~s\\~\\~ \\_u\\_ w&#8203;ww.e.example"
    ) in markdown
