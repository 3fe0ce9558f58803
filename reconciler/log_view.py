"""Renderings of a metadata chain for ``reconcile log`` (newest block first, like kamu log)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import yaml

from .odf import models
from .odf.multiformat import Multihash

Entry = tuple[Multihash, models.MetadataBlock]


def _block_json(block: models.MetadataBlock) -> dict[str, Any]:
    return block.model_dump(mode="json", by_alias=True, exclude_none=True)


def render_json(entries: Iterable[Entry]) -> str:
    return json.dumps(
        [{"blockHash": h, "block": _block_json(b)} for h, b in entries],
        indent=2,
        ensure_ascii=False,
    )


def render_yaml(entries: Iterable[Entry]) -> str:
    documents = [{"blockHash": str(h), "block": _block_json(b)} for h, b in entries]
    return yaml.safe_dump_all(documents, sort_keys=False, allow_unicode=True)


def render_text(entries: Iterable[Entry]) -> str:
    return "\n".join(_text_block(h, b) for h, b in entries)


def _text_block(hash_: Multihash, block: models.MetadataBlock) -> str:
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
    lines += _fields(body, 0)
    return "\n".join(lines) + "\n"


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
