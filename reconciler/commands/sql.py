"""``reconcile sql``: one read-only query over the datasets, on Spark."""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

from ..config import ConfigError
from ..engine.errors import describe
from ..engine.session import EngineUnavailableError
from ..inspection.sql import (
    TABLE_LIMIT,
    Scope,
    SqlError,
    export,
    render_table,
    run_sql,
    save_text,
    stream_sql,
)
from ..lineage.graph import lineage_graph
from ..plan.renames import renamed_to
from ..writer.scratch import scratch_dir
from .common import JavaNotFound, Session, fail, selection, usage_error
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
        raise usage_error("--format parquet needs --out FILE")
    if out is not None and out.resolve().is_relative_to(session.config.odf_dir.resolve()):
        raise usage_error(f"--out {out}: will not write into the ODF repository")
    names = None
    if select:  # the lineage graph costs a read of every manifest: only when asked
        graph = {n: node.inputs for n, node in lineage_graph(session.config).nodes.items()}
        names = selection(graph, select)

    scope = Scope(names, partial(renamed_to, session.config))
    session.check_cache()

    try:
        spark = session.spark()
        if output_format is SqlFormat.TABLE:
            rows = TABLE_LIMIT if limit is None else limit
            result = run_sql(spark, session.odf, query, rows, count_total=True, scope=scope)
            if out is None:
                sys.stdout.write(render_table(result))
            else:
                save_text(render_table(result), out)
            return
        # Every row: written by Spark's tasks and streamed, never collected whole.
        with scratch_dir(session.config.work_dir, "sql-") as scratch:
            fmt = output_format.value
            streamed = stream_sql(spark, session.odf, query, Path(scratch), fmt, limit, scope)
            if out is not None:
                export(streamed, out)
            else:
                sys.stdout.flush()
                streamed.write_text(sys.stdout.buffer)
                sys.stdout.buffer.flush()
    except (SqlError, ConfigError, EngineUnavailableError, JavaNotFound) as e:
        raise fail(f"error: {e}") from None
    except BrokenPipeError:
        raise  # the reader has gone: quietly (``ReconcileGroup``)
    except Exception as e:  # reported, never a traceback; nothing was written
        if session.verbose:
            raise
        raise fail(f"error: {describe(e)}") from None
