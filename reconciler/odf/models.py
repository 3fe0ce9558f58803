"""Pydantic models of every ODF metadata type (spec 0.34, plus the 0.35/0.36 fetch steps).

The models accept the ODF JSON/YAML form: camelCase keys, ``kind``-tagged unions (with
the camelCase and lower-case tag spellings kamu accepts), enums by name, RFC 3339
timestamps kept to the nanosecond, multibase hashes, ``did:odf`` ids, and unknown keys
rejected. ``model_dump(mode="json", by_alias=True, exclude_none=True)`` gives that form
back. Class names equal the FlatBuffers table names in ``reconciler/schemas/odf.fbs`` and field
names equal its field names, which is what lets ``codec`` map between the two without a
per-type table.
"""

from __future__ import annotations

import base64
import enum
from typing import Annotated, Any, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    StrictBool,
    model_validator,
)
from pydantic.alias_generators import to_camel

from .multiformat import DatasetId, Multihash
from .names import check_dataset_name
from .timestamps import Timestamp

UInt64 = Annotated[int, Field(ge=0, le=2**64 - 1)]
Int32 = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]


def _decode_base64(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except ValueError:
            raise ValueError("expected base64 text") from None
    return value


Base64Bytes = Annotated[
    bytes,
    BeforeValidator(_decode_base64),
    PlainSerializer(lambda b: base64.b64encode(b).decode("ascii"), when_used="json"),
]


class OdfModel(BaseModel):
    """Common configuration: camelCase aliases, unknown keys rejected, immutable values."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        ser_json_bytes="base64",
        val_json_bytes="base64",
    )


class OdfEnum(enum.StrEnum):
    """An ODF enum, written by name; lookup ignores case as kamu's YAML reader does."""

    @classmethod
    def _missing_(cls, value: object) -> OdfEnum | None:
        if isinstance(value, str):
            for member in cls:
                if member.value.lower() == value.lower():
                    return member
        return None

    @property
    def fb_value(self) -> int:
        """The FlatBuffers integer: the member's position in the declaration."""
        return list(type(self)).index(self)

    @classmethod
    def from_fb(cls, value: int) -> OdfEnum:
        members = list(cls)
        if not 0 <= value < len(members):
            raise ValueError(f"unknown {cls.__name__} value {value}")
        return members[value]


# Tag spellings of later spec versions that this reference level does not implement,
# so that a manifest using one is told what it is rather than "unknown kind".
LATER_SPEC_TAGS: dict[str, str] = {
    "changelogstream": "MergeStrategy::ChangelogStream (ODF 0.37)",
    "upsertstream": "MergeStrategy::UpsertStream (ODF 0.37)",
}


_KIND_SPELLINGS: dict[str, str] = {}


def _canonical_kind(tag: str) -> str | None:
    """Map any accepted spelling of a union tag to its PascalCase name.

    No two ODF union tags collide when lower-cased, so one table serves every union;
    it is built on first use from the tagged models defined in this module.
    """
    if not _KIND_SPELLINGS:
        for model in _all_subclasses(OdfModel):
            default = model.model_fields.get("kind")
            if default is not None and isinstance(default.default, str):
                _KIND_SPELLINGS[default.default.lower()] = default.default
    return _KIND_SPELLINGS.get(tag.lower())


def _all_subclasses(cls: type[OdfModel]) -> list[type[OdfModel]]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_all_subclasses(sub)]
    return found


def _normalize_kind(value: Any) -> Any:
    if isinstance(value, dict) and isinstance(value.get("kind"), str):
        tag = value["kind"]
        later = LATER_SPEC_TAGS.get(tag.lower())
        if later:
            raise ValueError(f"{later} is not supported yet")
        canonical = _canonical_kind(tag)
        if canonical is not None and canonical != tag:
            value = {**value, "kind": canonical}
    return value


# Applied to every union: accepts camelCase and lower-case tags before dispatch.
Tagged = BeforeValidator(_normalize_kind)
Kind = Field(discriminator="kind")


# --- Enums ---------------------------------------------------------------------------


class DatasetKind(OdfEnum):
    ROOT = "Root"
    DERIVATIVE = "Derivative"


class MqttQos(OdfEnum):
    AT_MOST_ONCE = "AtMostOnce"
    AT_LEAST_ONCE = "AtLeastOnce"
    EXACTLY_ONCE = "ExactlyOnce"


class SourceOrdering(OdfEnum):
    BY_EVENT_TIME = "ByEventTime"
    BY_NAME = "ByName"


class CompressionFormat(OdfEnum):
    GZIP = "Gzip"
    ZIP = "Zip"


# --- Plain fragments -------------------------------------------------------------------


class OffsetInterval(OdfModel):
    start: UInt64
    end: UInt64


class DataSlice(OdfModel):
    logical_hash: Multihash
    physical_hash: Multihash
    offset_interval: OffsetInterval
    size: UInt64


class Checkpoint(OdfModel):
    physical_hash: Multihash
    size: UInt64


class SourceState(OdfModel):
    source_name: str
    kind: str
    value: str


class RequestHeader(OdfModel):
    name: str
    value: str


class EnvVar(OdfModel):
    name: str
    value: str | None = None


class MqttTopicSubscription(OdfModel):
    path: str
    qos: MqttQos | None = None


class SqlQueryStep(OdfModel):
    alias: str | None = None
    query: str


class TemporalTable(OdfModel):
    name: str
    primary_key: list[str]


class TransformInput(OdfModel):
    dataset_ref: str
    alias: str | None = None


class ExecuteTransformInput(OdfModel):
    dataset_id: DatasetId
    prev_block_hash: Multihash | None = None
    new_block_hash: Multihash | None = None
    prev_offset: UInt64 | None = None
    new_offset: UInt64 | None = None


class AttachmentEmbedded(OdfModel):
    path: str
    content: str


class DatasetVocabulary(OdfModel):
    offset_column: str = "offset"
    operation_type_column: str = "op"
    system_time_column: str = "system_time"
    event_time_column: str = "event_time"


class Watermark(OdfModel):
    system_time: Timestamp
    event_time: Timestamp


# --- Unions ------------------------------------------------------------------------------


class EventTimeSourceFromMetadata(OdfModel):
    kind: Literal["FromMetadata"] = "FromMetadata"


class EventTimeSourceFromPath(OdfModel):
    kind: Literal["FromPath"] = "FromPath"
    pattern: str
    timestamp_format: str | None = None


class EventTimeSourceFromSystemTime(OdfModel):
    kind: Literal["FromSystemTime"] = "FromSystemTime"


EventTimeSource = Annotated[
    Union[  # noqa: UP007
        EventTimeSourceFromMetadata,
        EventTimeSourceFromPath,
        EventTimeSourceFromSystemTime,
    ],
    Kind,
    Tagged,
]


class SourceCachingForever(OdfModel):
    kind: Literal["Forever"] = "Forever"


SourceCaching = Annotated[
    Union[  # noqa: UP007
        SourceCachingForever,
    ],
    Kind,
    Tagged,
]


class FetchStepUrl(OdfModel):
    kind: Literal["Url"] = "Url"
    url: str
    event_time: EventTimeSource | None = None
    cache: SourceCaching | None = None
    headers: list[RequestHeader] | None = None


class FetchStepFilesGlob(OdfModel):
    kind: Literal["FilesGlob"] = "FilesGlob"
    path: str
    event_time: EventTimeSource | None = None
    cache: SourceCaching | None = None
    order: SourceOrdering | None = None


class FetchStepContainer(OdfModel):
    kind: Literal["Container"] = "Container"
    image: str
    command: list[str] | None = None
    args: list[str] | None = None
    env: list[EnvVar] | None = None


class FetchStepMqtt(OdfModel):
    kind: Literal["Mqtt"] = "Mqtt"
    host: str
    port: Int32
    username: str | None = None
    password: str | None = None
    topics: list[MqttTopicSubscription]


class FetchStepEthereumLogs(OdfModel):
    kind: Literal["EthereumLogs"] = "EthereumLogs"
    chain_id: UInt64 | None = None
    node_url: str | None = None
    filter: str | None = None
    signature: str | None = None


FetchStep = Annotated[
    Union[  # noqa: UP007
        FetchStepUrl,
        FetchStepFilesGlob,
        FetchStepContainer,
        FetchStepMqtt,
        FetchStepEthereumLogs,
    ],
    Kind,
    Tagged,
]


class PrepStepDecompress(OdfModel):
    kind: Literal["Decompress"] = "Decompress"
    format: CompressionFormat
    sub_path: str | None = None


class PrepStepPipe(OdfModel):
    kind: Literal["Pipe"] = "Pipe"
    command: list[str]


PrepStep = Annotated[
    Union[  # noqa: UP007
        PrepStepDecompress,
        PrepStepPipe,
    ],
    Kind,
    Tagged,
]


class ReadStepBase(OdfModel):
    """Shared by every reader: the DDL ``schema`` list is the only schema form we read."""

    @model_validator(mode="before")
    @classmethod
    def _reject_structured_schema(cls, data: Any) -> Any:
        if isinstance(data, dict) and ("ddlSchema" in data or isinstance(data.get("schema"), dict)):
            raise ValueError(
                "the structured read schema of ODF 0.38 ('ddlSchema' / 'schema: {fields}') is "
                "not supported yet; give 'schema' as a list of DDL strings"
            )
        return data


class ReadStepCsv(ReadStepBase):
    kind: Literal["Csv"] = "Csv"
    schema_: list[str] | None = Field(default=None, alias="schema")
    separator: str | None = None
    encoding: str | None = None
    quote: str | None = None
    escape: str | None = None
    # Strict: pydantic would take the strings "yes", "on" or "1" for true, which kamu
    # refuses; a manifest must mean the same to both.
    header: StrictBool | None = None
    infer_schema: StrictBool | None = None
    null_value: str | None = None
    date_format: str | None = None
    timestamp_format: str | None = None


class ReadStepGeoJson(ReadStepBase):
    kind: Literal["GeoJson"] = "GeoJson"
    schema_: list[str] | None = Field(default=None, alias="schema")


class ReadStepEsriShapefile(ReadStepBase):
    kind: Literal["EsriShapefile"] = "EsriShapefile"
    schema_: list[str] | None = Field(default=None, alias="schema")
    sub_path: str | None = None


class ReadStepParquet(ReadStepBase):
    kind: Literal["Parquet"] = "Parquet"
    schema_: list[str] | None = Field(default=None, alias="schema")


class ReadStepJson(ReadStepBase):
    kind: Literal["Json"] = "Json"
    sub_path: str | None = None
    schema_: list[str] | None = Field(default=None, alias="schema")
    date_format: str | None = None
    encoding: str | None = None
    timestamp_format: str | None = None


class ReadStepNdJson(ReadStepBase):
    kind: Literal["NdJson"] = "NdJson"
    schema_: list[str] | None = Field(default=None, alias="schema")
    date_format: str | None = None
    encoding: str | None = None
    timestamp_format: str | None = None


class ReadStepNdGeoJson(ReadStepBase):
    kind: Literal["NdGeoJson"] = "NdGeoJson"
    schema_: list[str] | None = Field(default=None, alias="schema")


ReadStep = Annotated[
    Union[  # noqa: UP007
        ReadStepCsv,
        ReadStepGeoJson,
        ReadStepEsriShapefile,
        ReadStepParquet,
        ReadStepJson,
        ReadStepNdJson,
        ReadStepNdGeoJson,
    ],
    Kind,
    Tagged,
]


class TransformSql(OdfModel):
    kind: Literal["Sql"] = "Sql"
    engine: str
    version: str | None = None
    query: str | None = None
    queries: list[SqlQueryStep] | None = None
    temporal_tables: list[TemporalTable] | None = None

    def normalized(self) -> TransformSql:
        """The form written to a chain: ``query`` becomes a one-step ``queries``."""
        if self.query is None:
            return self
        steps = [*(self.queries or []), SqlQueryStep(query=self.query)]
        return self.model_copy(update={"query": None, "queries": steps})


Transform = Annotated[
    Union[  # noqa: UP007
        TransformSql,
    ],
    Kind,
    Tagged,
]


class MergeStrategyAppend(OdfModel):
    kind: Literal["Append"] = "Append"


class MergeStrategyLedger(OdfModel):
    kind: Literal["Ledger"] = "Ledger"
    primary_key: list[str]


class MergeStrategySnapshot(OdfModel):
    kind: Literal["Snapshot"] = "Snapshot"
    primary_key: list[str]
    compare_columns: list[str] | None = None


MergeStrategy = Annotated[
    Union[  # noqa: UP007
        MergeStrategyAppend,
        MergeStrategyLedger,
        MergeStrategySnapshot,
    ],
    Kind,
    Tagged,
]


class AttachmentsEmbedded(OdfModel):
    kind: Literal["Embedded"] = "Embedded"
    items: list[AttachmentEmbedded]


Attachments = Annotated[
    Union[  # noqa: UP007
        AttachmentsEmbedded,
    ],
    Kind,
    Tagged,
]


# --- Metadata events -----------------------------------------------------------------------


class AddData(OdfModel):
    kind: Literal["AddData"] = "AddData"
    prev_checkpoint: Multihash | None = None
    prev_offset: UInt64 | None = None
    new_data: DataSlice | None = None
    new_checkpoint: Checkpoint | None = None
    new_watermark: Timestamp | None = None
    new_source_state: SourceState | None = None


class AddPushSource(OdfModel):
    kind: Literal["AddPushSource"] = "AddPushSource"
    source_name: str
    read: ReadStep
    preprocess: Transform | None = None
    merge: MergeStrategy


class ExecuteTransform(OdfModel):
    kind: Literal["ExecuteTransform"] = "ExecuteTransform"
    query_inputs: list[ExecuteTransformInput]
    prev_checkpoint: Multihash | None = None
    prev_offset: UInt64 | None = None
    new_data: DataSlice | None = None
    new_checkpoint: Checkpoint | None = None
    new_watermark: Timestamp | None = None


class Seed(OdfModel):
    kind: Literal["Seed"] = "Seed"
    dataset_id: DatasetId
    dataset_kind: DatasetKind


class SetPollingSource(OdfModel):
    kind: Literal["SetPollingSource"] = "SetPollingSource"
    fetch: FetchStep
    prepare: list[PrepStep] | None = None
    read: ReadStep
    preprocess: Transform | None = None
    merge: MergeStrategy


class SetTransform(OdfModel):
    kind: Literal["SetTransform"] = "SetTransform"
    inputs: list[TransformInput]
    transform: Transform


class SetVocab(OdfModel):
    kind: Literal["SetVocab"] = "SetVocab"
    offset_column: str | None = None
    operation_type_column: str | None = None
    system_time_column: str | None = None
    event_time_column: str | None = None


class SetAttachments(OdfModel):
    kind: Literal["SetAttachments"] = "SetAttachments"
    attachments: Attachments


class SetInfo(OdfModel):
    kind: Literal["SetInfo"] = "SetInfo"
    description: str | None = None
    keywords: list[str] | None = None


class SetLicense(OdfModel):
    kind: Literal["SetLicense"] = "SetLicense"
    short_name: str
    name: str
    spdx_id: str | None = None
    website_url: str


class SetDataSchema(OdfModel):
    """The data schema as the raw Arrow ``Schema`` flatbuffer (base64 in JSON and YAML)."""

    kind: Literal["SetDataSchema"] = "SetDataSchema"
    schema_: Base64Bytes = Field(alias="schema")


class DisablePushSource(OdfModel):
    kind: Literal["DisablePushSource"] = "DisablePushSource"
    source_name: str


class DisablePollingSource(OdfModel):
    kind: Literal["DisablePollingSource"] = "DisablePollingSource"


EVENT_TYPES: tuple[type[OdfModel], ...] = (
    AddData,
    ExecuteTransform,
    Seed,
    SetPollingSource,
    SetTransform,
    SetVocab,
    SetAttachments,
    SetInfo,
    SetLicense,
    SetDataSchema,
    AddPushSource,
    DisablePushSource,
    DisablePollingSource,
)

AnyEvent = Union[  # noqa: UP007
    AddData,
    ExecuteTransform,
    Seed,
    SetPollingSource,
    SetTransform,
    SetVocab,
    SetAttachments,
    SetInfo,
    SetLicense,
    SetDataSchema,
    AddPushSource,
    DisablePushSource,
    DisablePollingSource,
]
MetadataEvent = Annotated[AnyEvent, Kind, Tagged]


class MetadataBlock(OdfModel):
    system_time: Timestamp
    prev_block_hash: Multihash | None = None
    sequence_number: UInt64
    event: MetadataEvent


# A name by the spec's grammar: it becomes a folder under the ODF root (see ``names``).
DatasetName = Annotated[str, AfterValidator(check_dataset_name)]


class DatasetSnapshot(OdfModel):
    name: DatasetName
    kind: DatasetKind
    metadata: list[MetadataEvent]


class DatasetSnapshotManifest(OdfModel):
    """The YAML document people write: a ``DatasetSnapshot`` inside its manifest envelope."""

    kind: Literal["DatasetSnapshot"]
    version: Literal[1]
    content: DatasetSnapshot
