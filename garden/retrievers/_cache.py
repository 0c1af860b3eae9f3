"""A bounded cache that lives as long as the process: what is slow to make and safe to share
(a loaded model, a query's embedding), kept in memory and never written anywhere."""
from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Generic, Hashable, TypeVar

from garden.errors import GardenError

Value = TypeVar("Value")


class ProcessCache(Generic[Value]):
    """A bounded in-memory map that lives as long as the process and is never written
    anywhere: at most `limit` entries, the least recently used dropped first. `clear()`
    empties it (a benchmark's cold run)."""

    def __init__(self, limit: int):
        if limit < 1:
            raise GardenError(f"a cache holds at least one entry, got a limit of {limit}")
        self.limit = limit
        self._entries: OrderedDict[Hashable, Value] = OrderedDict()

    def get(self, key: Hashable, make: Callable[[], Value]) -> Value:
        """The value under `key`, made by `make()` and kept the first time it is asked for."""
        if key in self._entries:
            self._entries.move_to_end(key)
            return self._entries[key]
        value = self._entries[key] = make()
        while len(self._entries) > self.limit:
            self._entries.popitem(last=False)
        return value

    def drop(self, test: Callable[[Hashable], bool]) -> int:
        """Remove every entry whose key passes `test`; how many were removed."""
        gone = [key for key in self._entries if test(key)]
        for key in gone:
            del self._entries[key]
        return len(gone)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()
