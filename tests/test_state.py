"""The saved-index file (garden/_state.py): what is written is read back exactly; a file
damaged or edited in any byte is refused as it is read; a file crafted with consistent
checksums but hostile arrays either is refused or gives an index that answers queries
without an error. Nothing in a save runs as it loads."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from garden._state import FORMAT, State, WrongIndex, digest, read_state, write_state
from garden.pipelines.indexes import documents
from garden.formats.stories import load_story
from garden.rerank.phrase import PhraseIndex
from garden.retrievers import make_retriever

QUERIES = ("Why have I not felt like gaming recently?", "camp stove", "冰川", "")
LEXICAL = ("bm25", "bm25:variant=plus", "bm25s", "bm25s:method=bm25l", "tfidf", "tfidf:analyzer=char")


def _bytes(state: State, kind: str = "k", type_name: str = "T") -> bytes:
    out = io.BytesIO()
    write_state(out, kind, type_name, state)
    return out.getvalue()


def _read(data: bytes, kind: str = "k", type_name: str = "T") -> State:
    return read_state(io.BytesIO(data), kind, type_name)


texts = st.text(st.characters(codec="utf-8"), max_size=12)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(strings=st.lists(texts, max_size=20), ints=st.lists(st.integers(-2**63, 2**63 - 1), max_size=20),
       floats=st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=20))
def test_a_state_reads_back_exactly(strings, ints, floats):
    state = State(meta={"n": len(strings), "words": "über"})
    state.put_strings("s", strings)
    state.put("i", np.array(ints, dtype=np.int64))
    state.put("f", np.array(floats, dtype=np.float64))
    back = _read(_bytes(state))
    assert back.strings("s", len(strings)) == strings
    assert back.array("i", "i").tolist() == ints and back.array("f", "f").tolist() == floats
    assert back.meta == state.meta


def test_a_header_of_another_index_or_format_is_refused():
    data = _bytes(State(meta={"a": 1}), "retriever:bm25", "RankBM25")
    assert _read(data, "retriever:bm25", "RankBM25").meta == {"a": 1}
    for kind, type_name in (("retriever:bm25s", "RankBM25"), ("retriever:bm25", "BM25S")):
        with pytest.raises(WrongIndex):
            _read(data, kind, type_name)
    older = io.BytesIO()
    header = json.dumps({"format": 3, "kind": "retriever:bm25", "type": "RankBM25", "meta": {}, "sha256": digest({})})
    np.savez(older, __header__=np.frombuffer(header.encode(), dtype=np.uint8))
    with pytest.raises(WrongIndex, match=f"wanted format {FORMAT}"):
        _read(older.getvalue(), "retriever:bm25", "RankBM25")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Each lexical retriever's and the phrase index's state on Aurora Ridge, as written."""
    import os

    home = tmp_path_factory.mktemp("home")
    old = os.environ.get("GARDEN_HOME")
    os.environ["GARDEN_HOME"] = str(home)
    try:
        story = load_story("fixtures/aurora-ridge.yaml")
        docs = documents(story)
        out = {}
        for name in LEXICAL:
            retriever = make_retriever(name)
            retriever.index(docs)
            out[name] = (retriever.state(), [r.top(q, 5) for r in [retriever] for q in QUERIES])
        out["phrase"] = (PhraseIndex({d.id: d.text for d in docs}).state(), None)
        return docs, out
    finally:
        if old is None:
            os.environ.pop("GARDEN_HOME", None)
        else:
            os.environ["GARDEN_HOME"] = old


def _load(name: str, state: State, docs):
    if name == "phrase":
        return PhraseIndex.from_state(state, [d.id for d in docs])
    retriever = make_retriever(name)
    retriever.load_state(state, docs)
    return retriever


@pytest.mark.parametrize("name", LEXICAL + ("phrase",))
def test_a_saved_index_loads_as_it_was(saved, name):
    docs, states = saved
    state, tops = states[name]
    loaded = _load(name, _read(_bytes(state)), docs)
    if tops is not None:
        assert [loaded.top(q, 5) for q in QUERIES] == tops


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(LEXICAL + ("phrase",)), where=st.floats(0, 1, exclude_max=True),
       flip=st.integers(1, 255), cut=st.booleans())
def test_a_save_damaged_in_any_byte_is_refused(saved, name, where, flip, cut):
    docs, states = saved
    data = bytearray(_bytes(states[name][0]))
    at = int(where * len(data))
    if cut:
        del data[at:]
    else:
        data[at] ^= flip
    try:
        state = _read(bytes(data))
    except Exception:
        return  # refused: the cache removes it and rebuilds
    # read despite the change: only where a byte carries no content (zip padding, timestamps)
    assert {n: a.tobytes() for n, a in state.arrays.items()} == \
        {n: a.tobytes() for n, a in states[name][0].arrays.items()}


def _hostile(array: np.ndarray, how: str, value: int) -> np.ndarray:
    if how == "shorter":
        return array[: len(array) // 2]
    if how == "longer":
        return np.concatenate([array, array[:1] if len(array) else np.zeros(1, array.dtype)])
    if how == "dtype":
        return array.astype(np.float64) if array.dtype.kind != "f" else array.astype(np.int64)
    if how == "2d":
        return array.reshape(1, -1)
    if how == "negative" and array.dtype.kind in "iuf" and len(array):
        out = array.copy()
        out[value % len(out)] = -out[value % len(out)] - 1 if out.dtype.kind != "u" else out.max() + 1
        return out
    if how == "huge" and array.dtype.kind in "iuf" and len(array):
        out = array.copy()
        out[value % len(out)] = (np.iinfo if out.dtype.kind in "iu" else np.finfo)(out.dtype).max
        return out
    if how == "reversed":
        return array[::-1].copy()
    return array


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(LEXICAL + ("phrase",)), pick=st.integers(0, 10**6),
       how=st.sampled_from(["shorter", "longer", "dtype", "2d", "negative", "huge", "reversed", "missing"]),
       value=st.integers(0, 10**6))
def test_a_crafted_save_with_hostile_arrays_is_refused_or_answers(saved, name, pick, how, value):
    """A file written with the right checksums around wrong arrays (what someone who can
    write the garden home could make): refused as it loads, or an index whose queries run."""
    docs, states = saved
    good = states[name][0]
    names = sorted(good.arrays)
    target = names[pick % len(names)]
    arrays = dict(good.arrays)
    if how == "missing":
        del arrays[target]
    else:
        arrays[target] = _hostile(arrays[target], how, value)
    crafted = _read(_bytes(State(arrays, good.meta)))
    try:
        index = _load(name, crafted, docs)
    except (ValueError, KeyError, IndexError, TypeError):
        return  # refused as it loads: load_saved warns, removes it and rebuilds
    for query in QUERIES:
        if name == "phrase":
            words = tuple(query.lower().split()[:2])
            index.count(words), index.confirmed(words)
        else:
            index.top(query, 5), index.ceiling(query)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(LEXICAL + ("phrase",)), where=st.floats(0, 1, exclude_max=True),
       flip=st.integers(1, 255), cut=st.booleans(), lazy=st.booleans())
def test_a_save_on_disk_damaged_in_any_byte_is_refused(saved, tmp_path_factory, name, where, flip, cut, lazy):
    """Read from a file, an array is read straight into memory (garden._state._member),
    without zipfile's CRC: the sha256 still refuses every changed byte, eagerly or lazily."""
    docs, states = saved
    data = bytearray(_bytes(states[name][0]))
    at = int(where * len(data))
    if cut:
        del data[at:]
    else:
        data[at] ^= flip
    path = tmp_path_factory.mktemp("save") / "damaged.npz"
    path.write_bytes(bytes(data))
    try:
        with open(path, "rb") as fh:
            state = read_state(fh, "k", "T", lazy=lazy)
            arrays = {n: state.arrays[n].tobytes() for n in state.arrays}
    except Exception:
        return
    assert arrays == {n: a.tobytes() for n, a in states[name][0].arrays.items()}


@pytest.mark.parametrize("how", ["eager", "lazy", "mapped"])
def test_a_large_array_is_mapped_aligned_and_still_checked(tmp_path, how):
    """An array of 8 MiB or more is mapped from the file (garden._state.MAP_OVER), its data
    on a 64-byte boundary so BLAS takes it as it is; a byte changed in it is still refused."""
    from garden._state import ALIGN, MAP_OVER

    matrix = np.random.default_rng(7).standard_normal((MAP_OVER // (4 * 384) + 5, 384)).astype(np.float32)
    state = State(meta={})
    state.put("matrix", matrix)
    path = tmp_path / "big.npz"
    path.write_bytes(_bytes(state))
    reading = {"lazy": how == "lazy", "mapped": how == "mapped"}
    with open(path, "rb") as fh:
        back = read_state(fh, "k", "T", **reading).array("matrix", "f", 2, len(matrix))
        assert np.array_equal(back, matrix) and not back.flags.writeable
        assert back.ctypes.data % ALIGN == path.read_bytes().find(matrix.tobytes()[:64]) % ALIGN == 0
        query = matrix[3]
        assert np.array_equal(back @ query, matrix @ query)   # the same product, bit for bit
    data = bytearray(path.read_bytes())
    data[data.find(matrix.tobytes()[:64]) + 1000] ^= 1
    path.write_bytes(bytes(data))
    with open(path, "rb") as fh, pytest.raises(ValueError, match="sha256"):
        read_state(fh, "k", "T", **reading).array("matrix", "f", 2)


def _resident_file_kb() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("RssFile:"):
            return int(line.split()[1])
    return 0


@pytest.mark.parametrize("how", ["sorted", "unsorted", "out of bounds", "not finite"])
def test_a_mapped_array_is_checked_from_its_file_without_its_pages_in_the_process(tmp_path, how):
    """Read `mapped`, a large array's sha256, bounds, order and finiteness come from one pass
    over the file (garden._state._mapped): none of its pages is mapped into the process
    until it is read, and `positions`, `ordered` and `array` answer as they do for an array
    read whole."""
    from garden._state import MAP_OVER

    n = 8 * MAP_OVER // 8   # 64 MiB of int64
    values = np.arange(n, dtype=np.int64)
    if how == "unsorted":
        values[n // 2], values[n // 2 + 1] = values[n // 2 + 1], values[n // 2]
    if how == "out of bounds":
        values[-1] = n
    state = State(meta={})
    state.put("places", values)
    state.put("weights", np.where(values % 7 == 0, np.inf if how == "not finite" else 1.0, 0.5))
    path = tmp_path / "big.npz"
    path.write_bytes(_bytes(state))
    before = _resident_file_kb()
    with open(path, "rb") as fh:
        mapped = read_state(fh, "k", "T", mapped=True)
    assert set(mapped.scans) == {"places", "weights"}
    assert _resident_file_kb() - before < 16 * 1024   # of 128 MiB mapped
    with open(path, "rb") as fh:
        whole = read_state(fh, "k", "T")
    assert mapped.ordered("places") == whole.ordered("places") == (how != "unsorted")
    assert mapped.bounds("places") == whole.bounds("places") == (0, n if how == "out of bounds" else n - 1)
    for state in (mapped, whole):
        if how == "out of bounds":
            with pytest.raises(ValueError, match="points outside"):
                state.positions("places", n)
        else:
            assert np.array_equal(state.positions("places", n), values)
        if how == "not finite":
            with pytest.raises(ValueError, match="not finite"):
                state.array("weights", "f")
        else:
            assert state.array("weights", "f")[7] == 1.0
