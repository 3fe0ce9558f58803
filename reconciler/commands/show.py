"""``reconcile show PLAN.json``: a saved JSON plan rendered again, as text or Markdown.

Like ``terraform show``: CI plans once (``plan --format json --out plan.json``) and
renders the pull-request comment from that file, so the queries are analysed once and
the comment says exactly what the saved plan says.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..plan.load_json import plan_from_dict
from . import plan as plan_command
from .common import fail
from .options import OutputFormat


def run(file: Path, output_format: OutputFormat, out: Path | None) -> None:
    try:
        plan = plan_from_dict(json.loads(file.read_text(encoding="utf-8")))
    except (OSError, ValueError) as e:  # PlanFormatError and JSON errors are ValueErrors
        raise fail(f"error: {file}: {e}") from None
    plan_command.emit(plan_command.render(plan, output_format, out is None), out)
