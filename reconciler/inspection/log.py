"""Renderings of a metadata chain for ``reconcile log`` (newest block first, like kamu log).

Two things in a chain mean nothing to a person as stored: a ``SetDataSchema`` holds the
Arrow schema as a flatbuffer (base64 in YAML and JSON), and transforms name their inputs
by ``did:odf`` id. As ``kamu log`` does, the text shows the schema as its columns and puts
each input's dataset name next to its id. YAML and JSON keep each block exactly in its ODF
form, so a tool can read it back, and carry the readable forms beside it: ``schema`` (the
columns of a ``SetDataSchema``) and ``datasetNames`` (the known ids the block names).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
import yaml

from ..odf import models
from ..odf.arrow_schema import ArrowSchemaError, decode_arrow_schema
from ..odf.multiformat import Multihash

Entry = tuple[Multihash, models.MetadataBlock]
Names = Mapping[str, str]
"""Dataset names by ``did:odf`` id, from the Seed of every chain in the repository."""

_NO_NAMES: Names = {}


def render_json(entries: Iterable[Entry], names: Names = _NO_NAMES) -> str:
    return json.dumps([_entry(h, b, names) for h, b in entries], indent=2, ensure_ascii=False)


def render_yaml(entries: Iterable[Entry], names: Names = _NO_NAMES) -> str:
    documents = [_entry(h, b, names) for h, b in entries]
    return yaml.safe_dump_all(documents, sort_keys=False, allow_unicode=True)


def render_text(entries: Iterable[Entry], names: Names = _NO_NAMES) -> str:
    return "\n".join(_text_block(h, b, names) for h, b in entries)


# Structured (YAML and JSON) ----------------------------------------------------------------


def _block_json(block: models.MetadataBlock) -> dict[str, Any]:
    return block.model_dump(mode="json", by_alias=True, exclude_none=True)


def _entry(hash_: Multihash, block: models.MetadataBlock, names: Names) -> dict[str, Any]:
    entry: dict[str, Any] = {"blockHash": str(hash_), "block": _block_json(block)}
    event = block.event
    if isinstance(event, models.SetDataSchema):
        schema = _decoded(event)
        if isinstance(schema, pa.Schema):
            entry["schema"] = [
                {"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in schema
            ]
    known = {str(i): names[i] for i in _referenced_ids(event) if i in names}
    if known:
        entry["datasetNames"] = known
    return entry


def _referenced_ids(event: models.MetadataEvent) -> list[str]:
    """The dataset ids an event names: a transform's inputs."""
    if isinstance(event, models.ExecuteTransform):
        return [i.dataset_id for i in event.query_inputs]
    if isinstance(event, models.SetTransform):
        return [i.dataset_ref for i in event.inputs]
    return []


def _decoded(event: models.SetDataSchema) -> pa.Schema | ArrowSchemaError:
    """The event's Arrow schema, or why its bytes are not one (shown, not raised: a log
    must still show the rest of the chain)."""
    try:
        return decode_arrow_schema(event.schema_)
    except ArrowSchemaError as e:
        return e


# Text ----------------------------------------------------------------------------------------


def _text_block(hash_: Multihash, block: models.MetadataBlock, names: Names) -> str:
    event = block.event
    lines = [f"Block #{block.sequence_number}: {hash_}", f"SystemTime: {block.system_time}"]
    lines.append(f"Kind: {event.kind}")
    body = _block_json(block)["event"]
    body.pop("kind")
    if isinstance(event, models.AddData | models.ExecuteTransform):
        body.pop("newData", None)
        if event.new_data is not None:
            interval = event.new_data.offset_interval
            lines += [
                f"Offset.Start: {interval.start}",
                f"Offset.End: {interval.end}",
                f"NumRecords: {interval.end - interval.start + 1}",
                f"LogicalHash: {event.new_data.logical_hash}",
                f"PhysicalHash: {event.new_data.physical_hash}",
                f"Size: {event.new_data.size}",
            ]
    if isinstance(event, models.SetDataSchema):
        lines += _schema_lines(event, body.pop("schema"))
    if isinstance(event, models.ExecuteTransform):
        body["queryInputs"] = [_query_input(i, names) for i in body["queryInputs"]]
    if isinstance(event, models.SetTransform):
        body["inputs"] = [_named(i, "datasetRef", names) for i in body["inputs"]]
    lines += _fields(body, 0)
    return "\n".join(lines) + "\n"


def _schema_lines(event: models.SetDataSchema, raw: str) -> list[str]:
    """``Schema:`` then a line per column: ``name: type``, and ``not null`` when the
    column is required, spelt as pyarrow spells Arrow schemas."""
    schema = _decoded(event)
    if isinstance(schema, ArrowSchemaError):
        return [f"Schema: {raw} (not a readable Arrow schema: {schema})"]
    columns = [f"  {f.name}: {f.type}" + ("" if f.nullable else " not null") for f in schema]
    return ["Schema:", *columns]


def _query_input(item: dict[str, Any], names: Names) -> dict[str, Any]:
    """An ExecuteTransform input with its dataset's name and, as kamu shows, how many of
    its records the run read."""
    named = _named(item, "datasetId", names)
    if "newOffset" in item:
        first = item["prevOffset"] + 1 if "prevOffset" in item else 0
        named["numRecords"] = item["newOffset"] - first + 1
    return named


def _named(item: dict[str, Any], key: str, names: Names) -> dict[str, Any]:
    """``item`` with a ``name`` right after its dataset id ``key``, when the id is known."""
    out: dict[str, Any] = {}
    for k, v in item.items():
        out[k] = v
        if k == key and v in names:
            out["name"] = names[v]
    return out


def _fields(value: Any, depth: int) -> list[str]:
    pad = "  " * depth
    out: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            label = key[:1].upper() + key[1:]
            if isinstance(item, dict | list) and item:
                out.append(f"{pad}{label}:")
                out += _fields(item, depth + 1)
            else:
                out.append(f"{pad}{label}: {_scalar(item)}")
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict):
                nested = _fields(item, depth + 1)
                out.append(f"{pad}- {nested[0].strip()}")
                out += nested[1:]
            else:
                out.append(f"{pad}- {_scalar(item)}")
    return out


def _scalar(value: Any) -> str:
    if isinstance(value, str) and "\n" in value:
        return json.dumps(value, ensure_ascii=False)
    return "[]" if value == [] else str(value)
