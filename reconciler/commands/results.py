"""The JSON result of ``apply`` and ``verify`` (``reconciler/schemas/run-result.json``).

One document per run on stdout, so that CI reads statuses, records, offsets and times
without parsing the lines people read. The plan and progress lines go to stderr then.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..apply.outcome import Status
from ..inspection.verify import Verdict
from .progress import Finished

RESULT_FORMAT_VERSION = 1

_PROBLEMS = (Status.FAILED, Status.SKIPPED)


def applied(done: Finished) -> dict[str, Any]:
    outcome = done.outcome
    failed = outcome.status in _PROBLEMS
    return {
        "name": outcome.dataset,
        "status": outcome.status.value,
        "seconds": round(done.seconds, 3),
        "error": outcome.message if failed else None,
        "blocks": outcome.metadata_blocks + outcome.data_blocks,
        "metadataBlocks": outcome.metadata_blocks,
        "records": outcome.rows,
        "offsets": list(done.offsets) if done.offsets else None,
        "movedFiles": outcome.moved,
        "renamedFrom": outcome.renamed_from,
        "note": None if failed or not outcome.message else outcome.message,
    }


def verified(verdict: Verdict, seconds: float) -> dict[str, Any]:
    return {
        "name": verdict.dataset,
        "status": "valid" if verdict.valid else "invalid",
        "seconds": round(seconds, 3),
        "error": None,
        "blocks": verdict.blocks,
        "replayed": verdict.replayed,
        "problems": [
            {"message": p.message, "block": p.sequence_number, "fatal": p.fatal}
            for p in verdict.problems
        ],
    }


@dataclass
class RunResult:
    """A run's document, filled in as datasets finish."""

    command: str
    datasets: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    interrupted: bool = False
    discarded: str | None = None  # work an earlier attempt did and gave up (``loop``)

    def render(self, exit_code: int, line: str, seconds: float) -> str:
        """The document as one line of JSON (with its newline)."""
        statuses = Counter(str(d["status"]) for d in self.datasets)
        document = {
            "formatVersion": RESULT_FORMAT_VERSION,
            "command": self.command,
            "ok": exit_code == 0,
            "exitCode": exit_code,
            "interrupted": self.interrupted,
            "error": self.error,
            "discarded": self.discarded,
            "datasets": self.datasets,
            "summary": {
                "datasets": len(self.datasets),
                "statuses": dict(statuses),
                "records": sum(int(d.get("records", 0)) for d in self.datasets),
                "seconds": round(seconds, 3),
                "line": line,
            },
        }
        return json.dumps(document) + "\n"


def any_failed(finished: Sequence[Finished]) -> bool:
    """Whether any dataset failed or was skipped (the run then exits 1)."""
    return any(f.outcome.status in _PROBLEMS for f in finished)
