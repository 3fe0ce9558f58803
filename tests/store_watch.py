"""Counting a data store's writes, for the tests that kill a run at one of them.

A store outside git puts each object in place in one step, which is where a killed run
can stop: a folder store renames a complete temporary into the object's name, S3 makes
an object visible when its upload stream closes. ``watched_init`` wraps the file system
of every ``FileSystemStore`` made afterwards so that ``point("before store")`` and
``point("after store")`` are called around that step. It is used both by a run killed in
a process of its own (``test_crash_store.KILLABLE_WITH_STORE``) and by the uninterrupted
run in the test process, so both count the same writes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reconciler.odf.store_fs import FileSystemStore

Point = Callable[[str], None]


class _Closing:
    """An upload stream whose close makes the object visible (S3)."""

    def __init__(self, stream: Any, point: Point) -> None:
        self._stream = stream
        self._point = point

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def __enter__(self) -> _Closing:
        return self

    def __exit__(self, *exc: object) -> None:
        self._point("before store")
        self._stream.close()
        self._point("after store")


class Watched:
    """A pyarrow file system, its object-placing steps counted."""

    def __init__(self, filesystem: Any, point: Point) -> None:
        self._filesystem = filesystem
        self._point = point

    def __getattr__(self, name: str) -> Any:
        return getattr(self._filesystem, name)

    def open_output_stream(self, path: str, *args: Any, **kwargs: Any) -> Any:
        stream = self._filesystem.open_output_stream(path, *args, **kwargs)
        if "/.pending-" in path:  # a folder store's temporary: its rename is the step
            return stream
        return _Closing(stream, self._point)

    def move(self, src: str, dst: str) -> None:
        self._point("before store")
        self._filesystem.move(src, dst)
        self._point("after store")


def watched_init(point: Point) -> Callable[..., None]:
    """A ``FileSystemStore.__init__`` that watches the store's file system."""
    real_init = FileSystemStore.__init__

    def init(store: FileSystemStore, filesystem: Any, *args: Any, **kwargs: Any) -> None:
        real_init(store, Watched(filesystem, point), *args, **kwargs)

    return init
