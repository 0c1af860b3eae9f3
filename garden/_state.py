"""What an index keeps of itself when it is saved, and the file that holds it.

A saved index is data, never code: named NumPy arrays of numbers and a JSON header, in one
NumPy `.npz` archive (the format `numpy.savez` writes), read back with
``allow_pickle=False``, so an array of Python objects, the one part of the format that
could run code, is refused as the file is read. This is how bm25s saves its own indexes;
a pickle, which the garden used before, runs whatever its bytes say as it loads.

A `State` is what one index gives to be saved (`state()`) and takes back (`load_state` or
`from_state`): arrays by name, and `meta`, JSON-able numbers and strings. Text is kept as
UTF-8 bytes with offsets (`put_strings`, `strings`): an array of fixed-width strings would
make every entry as wide as the longest, so one long word could inflate the file a
thousandfold. Reading checks each array's dtype, shape and, for positions, their range
(`array`, `positions`): a file edited into different numbers of the right kind fails there,
with the array named, instead of mid-query.

The header names the format version (`FORMAT`), the index's kind (`retriever:bm25`,
`phrase`) and its type; a file whose header differs from what the reader expects is not
loaded (`WrongIndex`), whatever else it holds. It also carries the sha256 of every array
(`digest`: name, dtype, shape and bytes), so a save damaged on disk or edited after it was
written is refused as it is read, before a wrong number can reach a score. Each array's own
sha256 is there too (`arrays`), so a reader that needs few of a large save's arrays can
open it lazily (`read_state(..., lazy=True)`): the header is checked at once, and each
array is read and checked against its own sha256 the first time it is asked for, never
before and never unchecked.
"""
from __future__ import annotations

import hashlib
import io
import json
import mmap
import os
import struct
import zipfile
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, NamedTuple, Sequence

import numpy as np

FORMAT = 4  # 3 and before: pickles
HEADER = "__header__"
MAX_HEADER = 1 << 20  # bytes: a header is a few hundred


class WrongIndex(ValueError):
    """The file is a saved index, but not the one asked for (another kind, type or format)."""


class Scan(NamedTuple):
    """What one pass over a mapped array's bytes in the file found (`read_state(...,
    mapped=True)`), so that checking it never reads it through its mapping: its least and
    greatest values (integers), whether it never decreases, whether every value is finite."""

    low: int | None
    high: int | None
    ordered: bool
    finite: bool


@dataclass
class State:
    arrays: dict[str, np.ndarray] | Mapping[str, np.ndarray] = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    scans: dict[str, Scan] = field(default_factory=dict)  # a mapped array's name -> what its scan found

    # -- writing ---------------------------------------------------------------------
    def put(self, name: str, array) -> None:
        self.arrays[name] = np.ascontiguousarray(array)

    def put_strings(self, name: str, strings: Sequence[str]) -> None:
        encoded = [s.encode("utf-8", "surrogatepass") for s in strings]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in encoded], out=offsets[1:])
        self.put(f"{name}.utf8", np.frombuffer(b"".join(encoded), dtype=np.uint8))
        self.put(f"{name}.offsets", offsets)

    def put_rows(self, name: str, rows: Sequence[bytes]) -> None:
        """Byte strings read one at a time (`row`): each with its own sha256, so reading one
        checks that one, and a lazy read never reads the others."""
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum([len(r) for r in rows], out=offsets[1:])
        self.put(f"{name}.utf8", np.frombuffer(b"".join(rows), dtype=np.uint8))
        self.put(f"{name}.offsets", offsets)
        self.put(f"{name}.sha256", np.frombuffer(b"".join(hashlib.sha256(r).digest() for r in rows),
                                                 dtype=np.uint8).reshape(len(rows), 32))

    def nest(self, prefix: str, inner: State) -> None:
        """Keep `inner` inside this state under `prefix` (a fusion keeps its members')."""
        for name, array in inner.arrays.items():
            self.arrays[f"{prefix}.{name}"] = array
        self.meta[prefix] = inner.meta

    # -- reading ---------------------------------------------------------------------
    def array(self, name: str, kinds: str, ndim: int = 1, length: int | None = None) -> np.ndarray:
        """The array `name`, checked: its dtype kind one of `kinds` (numpy's letters: i
        signed, u unsigned, f float), `ndim` dimensions, `length` rows when given.
        ValueError naming the array otherwise."""
        if name not in self.arrays:
            raise ValueError(f"array {name!r} missing")
        array = self.arrays[name]
        if array.dtype.kind not in kinds or array.ndim != ndim or (length is not None and len(array) != length):
            raise ValueError(f"array {name!r} is {array.dtype}{list(array.shape)}, not the saved index's")
        scan = self.scans.get(name)
        if array.dtype.kind == "f" and not (scan.finite if scan is not None else _finite(array)):
            raise ValueError(f"array {name!r} holds a value that is not finite")
        return array

    def bounds(self, name: str) -> tuple[int, int] | None:
        """The least and greatest entry of the integer array `name`; None when it is empty."""
        array = self.array(name, "iu")
        scan = self.scans.get(name)
        if not array.size:
            return None
        return (scan.low, scan.high) if scan is not None else (int(array.min()), int(array.max()))

    def positions(self, name: str, bound: int, length: int | None = None) -> np.ndarray:
        """Integer array `name` whose every entry is in [0, bound): positions into another."""
        array = self.array(name, "iu", 1, length)
        found = self.bounds(name)
        if found is not None and (found[0] < 0 or found[1] >= bound):
            raise ValueError(f"array {name!r} points outside [0, {bound})")
        return array

    def ordered(self, name: str) -> bool:
        """Whether the one-dimensional numeric array `name` never decreases."""
        array = self.array(name, "iuf")
        scan = self.scans.get(name)
        return scan.ordered if scan is not None else bool((array[1:] >= array[:-1]).all())

    def strings(self, name: str, length: int | None = None) -> list[str]:
        data = self.array(f"{name}.utf8", "u", 1)
        offsets = self.array(f"{name}.offsets", "i", 1, None if length is None else length + 1)
        if (not len(offsets) or offsets[0] != 0 or offsets[-1] != len(data)
                or (len(offsets) > 1 and (np.diff(offsets) < 0).any())):
            raise ValueError(f"array {name!r}: offsets do not cut its text")
        text = data.tobytes()
        bounds = offsets.tolist()
        return [text[a:b].decode("utf-8", "surrogatepass") for a, b in zip(bounds, bounds[1:])]

    def row(self, name: str, n: int, count: int) -> bytes:
        """Row `n` of the `count` that `put_rows` kept under `name`, checked against its own
        sha256. A lazy state reads that row's bytes alone from the file."""
        offsets = self.array(f"{name}.offsets", "i", 1, count + 1)
        digests = self.array(f"{name}.sha256", "u", 2, count)
        start, end = int(offsets[n]), int(offsets[n + 1])
        if digests.shape[1:] != (32,) or not 0 <= start <= end:
            raise ValueError(f"array {name!r}: its offsets or hashes are not a save's")
        data = self.arrays.span(f"{name}.utf8", start, end) if isinstance(self.arrays, LazyArrays) else None
        if data is None:
            data = self.array(f"{name}.utf8", "u")[start:end].tobytes()
        if hashlib.sha256(data).digest() != digests[n].tobytes():
            raise ValueError(f"array {name!r}: row {n} is not the one it was saved with (sha256 differs)")
        return data

    def ids_of(self, docs) -> list[str]:
        """The saved ids (array `ids`), which must be those of `docs` in order: a save is
        read only for the documents it was made from."""
        if hasattr(docs, "encoded_ids"):
            # a saved story's documents: their ids as saved, compared as arrays, and their
            # own list of ids returned, so indexes on the same documents share one
            utf8, offsets = docs.encoded_ids()
            if not (np.array_equal(self.array("ids.utf8", "u"), utf8)
                    and np.array_equal(self.array("ids.offsets", "i"), offsets)):
                raise ValueError("saved for other documents")
            return docs.ids
        ids = self.strings("ids")
        if ids != [d.id for d in docs]:
            raise ValueError("saved for other documents")
        return ids

    def inner(self, prefix: str) -> State:
        """The state `nest` kept under `prefix`."""
        meta = self.meta.get(prefix)
        if not isinstance(meta, dict):
            raise ValueError(f"no saved state of {prefix!r}")
        start = f"{prefix}."
        scans = {n[len(start):]: scan for n, scan in self.scans.items() if n.startswith(start)}
        if isinstance(self.arrays, LazyArrays):
            return State(self.arrays.under(start), meta, scans)
        return State({n[len(start):]: a for n, a in self.arrays.items() if n.startswith(start)}, meta, scans)

    def number(self, key: str, low: float | None = None) -> float:
        value = self.meta.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (low is not None and value < low):
            raise ValueError(f"meta {key!r} is {value!r}, not a number of the saved index")
        return value


def digest(arrays: dict[str, np.ndarray]) -> str:
    """sha256 of the arrays: each one's name, dtype, shape and bytes, in name order."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        _hash_into(h, name, arrays[name])
    return h.hexdigest()


def array_digest(name: str, array: np.ndarray) -> str:
    """sha256 of one array: its name, dtype, shape and bytes (as `digest` hashes each)."""
    h = hashlib.sha256()
    _hash_into(h, name, array)
    return h.hexdigest()


def _hash_into(h, name: str, array: np.ndarray) -> None:
    array = np.ascontiguousarray(array)
    h.update(_hash_head(name, array.dtype, array.shape))
    h.update(memoryview(array).cast("B"))


def _hash_head(name: str, dtype: np.dtype, shape) -> bytes:
    """What an array's sha256 hashes before its bytes: its name, dtype and shape."""
    return json.dumps([name, dtype.str, list(shape)]).encode("utf-8")


def _read_into(fd: int, view: memoryview, offset: int, name: str) -> None:
    """Fill `view` from the file at `offset`, however many reads it takes."""
    at = 0
    while at < len(view):
        got = os.preadv(fd, [view[at:]], offset + at)
        if got <= 0:
            raise ValueError(f"array {name!r}: the file ends inside it")
        at += got


def _map(fd: int, offset: int, shape, dtype: np.dtype, count: int, flags: int) -> np.ndarray:
    """The array of `count` items at `offset` of the file, mapped read-only (`flags`)."""
    aligned = offset - offset % mmap.ALLOCATIONGRANULARITY
    mapped = mmap.mmap(fd, offset - aligned + count * dtype.itemsize, flags=flags, prot=mmap.PROT_READ,
                       offset=aligned)
    return np.frombuffer(mapped, dtype=dtype, count=count, offset=offset - aligned).reshape(shape)


def _located(archive, name: str):
    """(file descriptor, where the data starts, the npy header's shape, dtype, fortran order,
    the member's size) of a member stored uncompressed in an archive on disk; None for any
    other (compressed, or an archive in memory)."""
    zf, filename = archive.zip, archive._files.get(name) if hasattr(archive, "_files") else None
    try:
        fd = zf.fp.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        return None
    info = zf.getinfo(filename) if filename is not None else None
    if info is None or info.compress_type != zipfile.ZIP_STORED or info.compress_size != info.file_size:
        return None
    local = os.pread(fd, 30, info.header_offset)
    if len(local) != 30 or local[:4] != b"PK\x03\x04":
        raise ValueError(f"array {name!r}: not where the archive's directory says")
    start = info.header_offset + 30 + int.from_bytes(local[26:28], "little") + int.from_bytes(local[28:30], "little")
    head = io.BytesIO(os.pread(fd, min(info.file_size, MAX_HEADER), start))
    version = np.lib.format.read_magic(head)
    reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran, dtype = reader(head)
    if dtype.hasobject:
        raise ValueError(f"array {name!r} holds Python objects, which are not read")
    count = int(np.prod(shape, dtype=np.int64))
    if head.tell() + count * dtype.itemsize != info.file_size:
        raise ValueError(f"array {name!r}: its size is not its shape's")
    return fd, start + head.tell(), shape, dtype, fortran, count


FINITE_CHUNK = 1 << 20


def _finite(array: np.ndarray) -> bool:
    """Whether every value is finite, without a mask as large as the array. A float32 (or
    narrower) array's sum in float64 cannot overflow (38 digits of exponent at most, summed),
    so it is finite exactly when every value is; wider floats are checked a chunk at a time."""
    flat = array.reshape(-1)
    if array.dtype.itemsize <= 4:
        return bool(np.isfinite(np.add.reduce(flat, dtype=np.float64)))
    return all(np.isfinite(flat[i:i + FINITE_CHUNK]).all() for i in range(0, len(flat), FINITE_CHUNK))


MAP_OVER = 8 << 20   # bytes: an array this large is mapped from the file, not copied
MAP_FLAGS = mmap.MAP_PRIVATE | getattr(mmap, "MAP_POPULATE", 0)


def _member(archive, name: str) -> np.ndarray:
    """The array `name` of an open `.npz` archive. A member stored uncompressed (as
    `numpy.savez` writes them) in an archive on disk is read straight into its array, one
    read: numpy's own reader copies it through zipfile in small pieces and checks its CRC,
    which cost most of loading a large index (the sha256 checks the bytes anyway). Any other
    member, or an archive in memory, is read by numpy. An array of objects is refused as
    numpy refuses it with pickle off."""
    found = _located(archive, name)
    if found is None or found[4]:   # not on disk uncompressed, or in Fortran order: numpy reads it
        return archive[name]
    fd, offset, shape, dtype, _, count = found
    if count * dtype.itemsize >= MAP_OVER and offset % ALIGN == 0:
        # mapped read-only from the page cache in one call (populated at once where the
        # system can): no copy, and none of the page faults of filling fresh memory, which
        # cost more than the read itself at 100,000 records. A save is never written in
        # place (it is replaced by a rename), so the mapping keeps the bytes it was opened on.
        return _map(fd, offset, shape, dtype, count, MAP_FLAGS)
    array = np.empty(count, dtype=dtype)
    _read_into(fd, memoryview(array).cast("B"), offset, name)
    return array.reshape(shape)


SCAN_BYTES = 16 << 20   # bytes of a mapped array read from the file at once to check it


def _mapped(found: tuple, name: str) -> tuple[np.ndarray, Scan, str]:
    """The array `_located` found, mapped from the file without bringing its pages into the
    process (a query reads those it touches), and one pass over its bytes read from the
    file a chunk at a time into one buffer: its sha256 (as `array_digest` hashes it) and
    its `Scan`. Checking a mapped array through its mapping would make every page of it
    resident in the process; read this way, they are the system's file cache, which any
    process shares and the system may drop."""
    fd, offset, shape, dtype, _, count = found
    h = hashlib.sha256()
    h.update(_hash_head(name, dtype, shape))
    per = max(1, SCAN_BYTES // dtype.itemsize)
    buffer = np.empty(min(per, count), dtype=dtype)
    low = high = last = None
    ordered = finite = True
    for start in range(0, count, per):
        chunk = buffer[:min(per, count - start)]
        view = memoryview(chunk).cast("B")
        _read_into(fd, view, offset + start * dtype.itemsize, name)
        h.update(view)
        if dtype.kind in "iu":
            least, most = int(chunk.min()), int(chunk.max())
            low, high = (least, most) if low is None else (min(low, least), max(high, most))
        if dtype.kind == "f":
            finite = finite and _finite(chunk)
        ordered = ordered and (last is None or bool(chunk[0] >= last)) and bool((chunk[1:] >= chunk[:-1]).all())
        last = chunk[-1]
    return _map(fd, offset, shape, dtype, count, mmap.MAP_PRIVATE), Scan(low, high, ordered, finite), h.hexdigest()


class LazyArrays(Mapping):
    """A save's arrays, each read from the open archive and checked against its own sha256
    the first time it is asked for (`read_state(..., lazy=True)`). A damaged array raises
    ValueError naming it, as an eager read would, only later: when it is first read."""

    def __init__(self, archive, digests: dict[str, str], prefix: str = "", loaded: dict | None = None):
        self._archive, self._digests, self._prefix = archive, digests, prefix
        self._loaded = {} if loaded is None else loaded   # shared with views made by `under`
        self._where: dict = {}                             # name -> where `span` reads it

    def __getitem__(self, name: str) -> np.ndarray:
        full = self._prefix + name
        found = self._loaded.get(full)
        if found is None:
            if full not in self._digests:
                raise KeyError(name)
            found = _member(self._archive, full)
            if array_digest(full, found) != self._digests[full]:
                raise ValueError(f"array {full!r} is not the one it was saved with (sha256 differs)")
            self._loaded[full] = found
        return found

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and self._prefix + name in self._digests

    def __iter__(self) -> Iterator[str]:
        return (n[len(self._prefix):] for n in self._digests if n.startswith(self._prefix))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def span(self, name: str, start: int, end: int) -> bytes | None:
        """Bytes [start, end) of the one-dimensional byte array `name`, read from the file
        alone, unchecked (`State.row` checks them); None when they cannot be (read it whole)."""
        full = self._prefix + name
        if full in self._loaded or full not in self._digests:
            return None
        if full not in self._where:
            self._where[full] = _located(self._archive, full)
        found = self._where[full]
        if found is None or found[3] != np.uint8 or len(found[2]) != 1 or end > found[5]:
            return None
        data = os.pread(found[0], end - start, found[1] + start)
        if len(data) != end - start:
            raise ValueError(f"array {full!r}: the file ends inside it")
        return data

    def under(self, prefix: str) -> LazyArrays:
        """The arrays whose names start with `prefix`, named without it (`State.inner`)."""
        return LazyArrays(self._archive, self._digests, self._prefix + prefix, self._loaded)


def write_state(out, kind: str, type_name: str, state: State) -> None:
    """Write `state` to the open binary file `out`, headed by what it is."""
    header = json.dumps({"format": FORMAT, "kind": kind, "type": type_name, "meta": state.meta,
                         "sha256": digest(state.arrays),
                         "arrays": {name: array_digest(name, a) for name, a in state.arrays.items()}},
                        sort_keys=True, allow_nan=False).encode("utf-8")
    if HEADER in state.arrays:
        raise ValueError(f"an index may not name an array {HEADER}")
    _savez_aligned(out, {HEADER: np.frombuffer(header, dtype=np.uint8), **state.arrays})


ALIGN = 64   # bytes: where every array's data starts in the file (numpy pads its own header to 64)


def _savez_aligned(out, arrays: dict[str, np.ndarray]) -> None:
    """What `numpy.savez` writes (an uncompressed zip of `.npy` members, zip64 headers,
    readable by `numpy.load`), with each member's local header padded by an extra field of
    its own (id 0xCAFE, which zip readers skip) so its data starts on a multiple of `ALIGN`
    in the file: mapped from there, a large array is an aligned array, as BLAS needs."""
    with zipfile.ZipFile(out, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, array in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            # local header: 30 bytes, the name, this extra field (4 + pad), zip64's (20)
            base = zf.fp.tell() + 30 + len(info.filename.encode("utf-8")) + 4 + 20
            pad = -base % ALIGN
            info.extra = struct.pack("<HH", 0xCAFE, pad) + bytes(pad)
            with zf.open(info, "w", force_zip64=True) as fid:
                np.lib.format.write_array(fid, np.asanyarray(array), allow_pickle=False)


def read_state(path: Path | io.IOBase, kind: str, type_name: str, lazy: bool = False, mapped: bool = False) -> State:
    """The state saved in `path` (a path or an open binary file) for an index of `kind`
    and `type_name`. WrongIndex when it is another's; ValueError (or whatever numpy raises
    on a torn archive) when it is not a saved index at all. Nothing in it is executed.

    `lazy`: only the header is read now; each array is read and checked when first asked
    for (`LazyArrays`), and the archive stays open until the state is dropped.

    `mapped`: every large array is mapped from the file and checked from the file (`_mapped`),
    so none of its pages is in the process until something reads it: an index of a million
    records of which a query reads a few pages. What the checks of `State` read of such an
    array (its bounds, its order, its finiteness) is what the scan found."""
    archive = np.load(path, allow_pickle=False)
    try:
        if HEADER not in archive.files:
            raise ValueError("no header: not a saved index")
        raw = archive[HEADER]
        if raw.dtype != np.uint8 or raw.ndim != 1 or len(raw) > MAX_HEADER:
            raise ValueError("header is not JSON text")
        header = json.loads(raw.tobytes().decode("utf-8"))
        if not isinstance(header, dict) or not isinstance(header.get("meta"), dict):
            raise ValueError("header is not an object with a meta object")
        found = (header.get("format"), header.get("kind"), header.get("type"))
        if found != (FORMAT, kind, type_name):
            raise WrongIndex(f"it holds format {found[0]!r}, kind {found[1]!r}, type {found[2]!r}; "
                             f"wanted format {FORMAT}, kind {kind!r}, type {type_name!r}")
        if lazy:
            digests = header.get("arrays")
            names = set(archive.files) - {HEADER}
            if (not isinstance(digests, dict) or set(digests) != names
                    or not all(isinstance(v, str) for v in digests.values())):
                raise ValueError("its arrays are not those its header lists")
            return State(LazyArrays(archive, digests), header["meta"])
        arrays, scans, scanned = {}, {}, {}
        for name in archive.files:
            found = _located(archive, name) if mapped and name != HEADER else None
            if (found is not None and not found[4] and found[3].kind in "iuf" and found[1] % ALIGN == 0
                    and found[5] * found[3].itemsize >= MAP_OVER):
                arrays[name], scans[name], scanned[name] = _mapped(found, name)
            elif name != HEADER:
                arrays[name] = _member(archive, name)
    except BaseException:
        archive.close()
        raise
    archive.close()
    digests = header.get("arrays")
    if isinstance(digests, dict) and set(digests) == set(arrays):
        # each array against its own sha256, on both cores: hashing (which frees the
        # interpreter) is most of loading a large index
        rest = [n for n in arrays if n not in scanned]
        with ThreadPoolExecutor(max_workers=2) as pool:
            found = {**scanned, **dict(zip(rest, pool.map(array_digest, rest, [arrays[n] for n in rest])))}
        bad = sorted(n for n in arrays if found[n] != digests[n])
        if bad:
            raise ValueError(f"array {bad[0]!r} is not the one it was saved with (sha256 differs)")
    elif digest(arrays) != header.get("sha256"):
        raise ValueError("its arrays are not those it was saved with (sha256 differs)")
    return State(arrays, header["meta"], scans)
