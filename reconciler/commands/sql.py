"""``reconcile sql``: one read-only query over the datasets, on Spark."""

from __future__ import annotations

import sys
from pathlib import Path

from ..config import ConfigError
from ..engine.errors import describe
from ..engine.session import EngineUnavailableError
from ..inspection.sql import TABLE_LIMIT, SqlError, render, run_sql, save
from ..lineage.graph import lineage_graph
from .common import JavaNotFound, Session, fail, selection
from .options import SqlFormat


def run(
    session: Session,
    query: str,
    output_format: SqlFormat,
    out: Path | None,
    limit: int | None,
    select: list[str] | None,
) -> None:
    """Print (or save) the result; errors are one ``error:`` line with exit 1."""
    if output_format is SqlFormat.PARQUET and out is None:
        raise fail("error: --format parquet needs --out FILE")
    if out is not None and out.resolve().is_relative_to(session.config.odf_dir.resolve()):
        raise fail(f"error: {out}: will not write into the ODF repository")
    names = None
    if select:  # the lineage graph costs a read of every manifest: only when asked
        graph = {n: node.inputs for n, node in lineage_graph(session.config).nodes.items()}
        names = selection(graph, select)
    is_table = output_format is SqlFormat.TABLE
    try:
        spark = session.spark()
        rows = TABLE_LIMIT if limit is None and is_table else limit
        result = run_sql(spark, session.odf, query, rows, count_total=is_table, names=names)
        if out is None:
            sys.stdout.write(render(result, output_format.value))
        else:
            save(result, output_format.value, out)
    except (SqlError, ConfigError, EngineUnavailableError, JavaNotFound) as e:
        raise fail(f"error: {e}") from None
    except Exception as e:  # reported, never a traceback; nothing was written
        if session.verbose:
            raise
        raise fail(f"error: {describe(e)}") from None
