"""GeoJSON, NdGeoJSON and zipped Esri Shapefiles re-encoded as NDJSON for Spark.

Spark has no reader for these formats, and kamu (ENGINE-SEMANTICS §1.9, CLI
``readers/geojson.rs``, ``ndgeojson.rs``, ``shapefile.rs``) does not read them natively
either: it rewrites each feature as one JSON object per line - the feature's properties
(or the shape's .dbf record) plus a ``geometry`` key holding the geometry as a JSON
*string* - and reads that with its NDJSON reader. This module does the same rewrite in
plain Python so that the Spark side is the ordinary NDJSON path, schema included.

The geometry string matches kamu's: serde_json without ``preserve_order`` writes object
keys sorted and without spaces (``{"coordinates":[[0.0,0.0]],"type":"Point"}``), which is
``json.dumps(..., sort_keys=True, separators=(",", ":"))``. Shapefile shapes are first
converted as the Rust ``shapefile`` crate converts them to ``geo_types``: 2-D
coordinates only, every polygon shape a ``MultiPolygon`` and every polyline a
``MultiLineString``; dBASE numbers are written as doubles, like kamu's ``from_f64``.

Where kamu fails on valid input it is not copied: GeoJSON's ``"properties": null`` and
``"geometry": null`` give no columns and a null geometry, a null shape gives a null
geometry, dates are ISO ``YYYY-MM-DD`` (kamu writes ``2020-1-5``), and macOS
``__MACOSX/`` entries in an archive are not taken for shapefiles.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import json
import shutil
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, TextIO

import shapefile  # type: ignore[import-untyped]

_COMPANIONS = (".shx", ".dbf", ".cpg")
_NUMERIC_FIELDS = {"N", "F"}


class GeoFormatError(ValueError):
    """Input that is not the geo format it was declared to be; the message says where."""


def geometry_json(geometry: Any) -> str | None:
    """A geometry as kamu stores it: compact JSON with sorted keys, or None for none."""
    if geometry is None:
        return None
    return json.dumps(geometry, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def record_line(record: Mapping[str, Any]) -> str:
    """One NDJSON line (without the newline)."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def feature_record(feature: Any, where: str) -> dict[str, Any]:
    """A GeoJSON Feature as one record: its properties plus the ``geometry`` string (a
    property of that name is replaced, as in kamu)."""
    if not isinstance(feature, dict):
        raise GeoFormatError(f"{where}: expected a Feature object, got {_kind(feature)}")
    if feature.get("type") != "Feature":
        raise GeoFormatError(f"{where}: expected a Feature, got type {feature.get('type')!r}")
    properties = feature.get("properties")
    if properties is not None and not isinstance(properties, dict):
        raise GeoFormatError(f"{where}: 'properties' is {_kind(properties)}, not an object")
    geometry = feature.get("geometry")
    if geometry is not None and not isinstance(geometry, dict):
        raise GeoFormatError(f"{where}: 'geometry' is {_kind(geometry)}, not an object")
    return {**(properties or {}), "geometry": geometry_json(geometry)}


def geojson_to_ndjson(source: Path, out: TextIO) -> int:
    """Write every feature of a FeatureCollection document; returns how many."""
    try:
        document = json.loads(source.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise GeoFormatError(f"not a JSON document: {e}") from None
    if not isinstance(document, dict) or document.get("type") != "FeatureCollection":
        found = document.get("type") if isinstance(document, dict) else _kind(document)
        raise GeoFormatError(f"expected a GeoJSON FeatureCollection, got {found!r}")
    features = document.get("features")
    if not isinstance(features, list):
        raise GeoFormatError("the FeatureCollection has no 'features' array")
    for number, feature in enumerate(features, start=1):
        out.write(record_line(feature_record(feature, f"feature {number}")) + "\n")
    return len(features)


def ndgeojson_to_ndjson(source: Path, out: TextIO) -> list[int]:
    """Write one record per Feature line (blank lines skipped); returns the source line
    number of each written record, so that a bad record can be reported by its line."""
    lines: list[int] = []
    with source.open(encoding="utf-8") as file:
        for number, text in enumerate(file, start=1):
            text = text.strip()
            if not text:
                continue
            try:
                feature = json.loads(text)
            except json.JSONDecodeError as e:
                raise GeoFormatError(f"line {number}: not JSON ({e}): {_clip(text)}") from None
            out.write(record_line(feature_record(feature, f"line {number}")) + "\n")
            lines.append(number)
    return lines


def shapefile_to_ndjson(archive: Path, sub_path: str | None, scratch: Path, out: TextIO) -> int:
    """Write every shape of the archive's shapefile (chosen by ``sub_path``) with its
    dBASE record; returns how many. ``scratch`` is an empty directory for the three or
    four member files, which are extracted under fixed names (never the archive's
    paths, so a hostile archive cannot write outside it)."""
    try:
        with zipfile.ZipFile(archive) as zipped:
            names = zipped.namelist()
            shp = locate_shp(names, sub_path)
            members = _companions(names, shp)
            if ".dbf" not in members:
                raise GeoFormatError(f"{shp} has no .dbf file beside it in the archive")
            base = scratch / "shape"
            for suffix, member in {".shp": shp, **members}.items():
                with zipped.open(member) as src, base.with_suffix(suffix).open("wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)  # a chunk at a time, never whole
    except zipfile.BadZipFile as e:
        raise GeoFormatError(f"not a zip archive: {e}") from None
    count = 0
    try:
        with shapefile.Reader(str(base.with_suffix(".shp"))) as reader:
            fields = [(f.name, f.field_type) for f in reader.fields[1:]]  # [0]: deletion flag
            for number, item in enumerate(reader.iterShapeRecords(), start=1):
                record = {
                    name: _dbf_value(value, kind)
                    for (name, kind), value in zip(fields, item.record, strict=True)
                }
                record["geometry"] = geometry_json(_shape_geometry(item.shape, number))
                out.write(record_line(record) + "\n")
                count = number
    except (shapefile.ShapefileException, UnicodeDecodeError, OSError) as e:
        raise GeoFormatError(f"{shp}: cannot read the shapefile: {e}") from None
    return count


def locate_shp(names: Sequence[str], sub_path: str | None) -> str:
    """The one ``.shp`` member that ``sub_path`` names: the member itself, its path
    without ``.shp``, a directory holding exactly one, or a glob (ODF: "can contain glob
    patterns"). Without ``sub_path`` the archive must hold exactly one."""
    shps = sorted(n for n in names if n.lower().endswith(".shp") and not _is_junk(n))
    if sub_path is None:
        if len(shps) == 1:
            return shps[0]
        if not shps:
            raise GeoFormatError("the archive contains no .shp file")
        raise GeoFormatError(
            "the archive contains several .shp files; set subPath to one of: " + ", ".join(shps)
        )
    wanted = sub_path.strip().removeprefix("./").strip("/")
    rules = (
        [n for n in shps if n == wanted],
        [n for n in shps if n[:-4] == wanted or PurePosixPath(n).stem == wanted],
        [n for n in shps if n.startswith(wanted + "/")],
        [n for n in shps if fnmatch.fnmatchcase(n, wanted) or fnmatch.fnmatchcase(n[:-4], wanted)],
    )
    matches = next((rule for rule in rules if rule), [])
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise GeoFormatError(
            f"no .shp file in the archive matches subPath {sub_path!r}; it contains: "
            + (", ".join(shps) or "no .shp files")
        )
    raise GeoFormatError(f"several .shp files match subPath {sub_path!r}: " + ", ".join(matches))


def _companions(names: Sequence[str], shp: str) -> dict[str, str]:
    stem = shp[:-4]
    found: dict[str, str] = {}
    for name in names:
        suffix = name[len(stem) :].lower()
        if name.startswith(stem) and suffix in _COMPANIONS:
            found[suffix] = name
    return found


def _is_junk(name: str) -> bool:
    """Finder's resource forks (``__MACOSX/._x.shp``), which are not shapefiles."""
    return name.startswith("__MACOSX/") or PurePosixPath(name).name.startswith("._")


def _dbf_value(value: Any, kind: str) -> Any:
    if value is None:
        return None
    if kind in _NUMERIC_FIELDS and isinstance(value, int | float):
        return float(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def _shape_geometry(shape: Any, number: int) -> dict[str, Any] | None:
    """The shape as GeoJSON, shaped as kamu's ``geo_types`` conversion shapes it."""
    if shape.shapeType == shapefile.NULL:
        return None
    try:
        interface = shape.__geo_interface__
    except shapefile.GeoJSON_Error as e:
        raise GeoFormatError(f"record {number}: {e}") from None
    kind = interface["type"]
    coordinates = _xy(interface["coordinates"])
    if kind == "Point" and not coordinates:
        return None
    if kind in ("LineString", "Polygon"):
        kind = "Multi" + kind
        coordinates = [coordinates] if coordinates else []
    return {"type": kind, "coordinates": coordinates}


def _xy(coordinates: Any) -> Any:
    """Nested coordinate lists with every position cut to ``[x, y]`` floats."""
    if coordinates and isinstance(coordinates[0], int | float):
        return [float(coordinates[0]), float(coordinates[1])]
    return [_xy(part) for part in coordinates]


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return repr(value)


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
