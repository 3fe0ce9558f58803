"""Features a manifest may use that this reconciler cannot run yet, found by name.

The models accept everything ODF 0.34-0.36 defines, so any manifest can be read, planned
and reviewed; what the engine cannot execute is reported here, before apply, with the
spec's name for it and where it is in the manifest.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..odf import models

ENGINE = "spark"
_UNSUPPORTED_STEPS: dict[type, str] = {
    models.FetchStepMqtt: "FetchStep::Mqtt",
    models.FetchStepEthereumLogs: "FetchStep::EthereumLogs",
}


def unsupported_features(snapshot: models.DatasetSnapshot) -> Iterator[tuple[str, str]]:
    """(message, field path) for each feature of the manifest the reconciler cannot run."""
    for i, event in enumerate(snapshot.metadata):
        path = f"content.metadata[{i}]"
        if isinstance(event, models.SetPollingSource):
            name = _UNSUPPORTED_STEPS.get(type(event.fetch))
            if name:
                yield f"{name} sources are not supported yet", f"{path}.fetch"
        if isinstance(event, models.SetPollingSource | models.AddPushSource) and event.preprocess:
            yield from _transform(event.preprocess, f"{path}.preprocess")
        if isinstance(event, models.SetTransform):
            yield from _transform(event.transform, f"{path}.transform")


def _transform(transform: models.TransformSql, path: str) -> Iterator[tuple[str, str]]:
    if transform.engine != ENGINE:
        yield (
            f"engine {transform.engine!r} is not supported: queries run on Spark "
            f"(engine: {ENGINE})",
            f"{path}.engine",
        )
    if transform.temporal_tables:
        yield "temporalTables (a Flink extension) are not supported", f"{path}.temporalTables"
