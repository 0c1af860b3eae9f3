"""Test collections on disk: documents, queries and relevance judgments.

Two layouts are read. TREC (the one Vaswani ships in): a ``corpus/`` folder of files made
of ``<DOC><DOCNO>id</DOCNO> text </DOC>`` blocks, a topics file of
``<top><num>id</num><title>text</title></top>`` blocks and a qrels file of
``qid iteration docno relevance`` lines. BEIR: ``corpus.jsonl`` (``_id``, ``title``,
``text``), ``queries.jsonl`` (``_id``, ``text``) and ``qrels/test.tsv`` with a header line.
Queries are lower-cased, as in the reference runs the expected figures come from.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from garden.errors import GardenError
from garden.retrievers import Doc

TREC_TOPIC_FILES = ("query-text.trec", "topics.trec", "topics", "queries.trec", "topics.txt")
TREC_QRELS_FILES = ("qrels", "qrels.trec", "qrels.txt")


@dataclass
class Collection:
    name: str
    docs: list[Doc]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def judged_queries(self) -> dict[str, str]:
        """The queries that have at least one judgment: the ones a metric can score."""
        return {qid: text for qid, text in self.queries.items() if qid in self.qrels}


def load_collection(path: str | Path) -> Collection:
    """Read the collection in folder `path`, TREC or BEIR, whichever its files say."""
    root = Path(path)
    if not root.is_dir():
        raise GardenError(f"{root}: not a folder holding a test collection")
    if (root / "corpus.jsonl").is_file():
        return load_beir(root)
    if (root / "corpus").is_dir():
        return load_trec(root)
    raise GardenError(
        f"{root}: not a known collection layout: expected corpus/ with topics and qrels (TREC) "
        f"or corpus.jsonl, queries.jsonl and qrels/test.tsv (BEIR)"
    )


# --- TREC ----------------------------------------------------------------------------

_TAG = re.compile(r"<[^>]+>")
_DOCNO = re.compile(r"<DOCNO>\s*(.*?)\s*</DOCNO>", re.IGNORECASE | re.DOTALL)


def _first_existing(root: Path, names: tuple[str, ...], what: str) -> Path:
    for name in names:
        if (root / name).is_file():
            return root / name
    raise GardenError(f"{root}: no {what} file; expected one of {', '.join(names)}")


def _clean(text: str) -> str:
    return " ".join(_TAG.sub(" ", text).split())


def read_trec_docs(path: Path) -> list[Doc]:
    """The <DOC> blocks of one file; other tags inside a block are dropped, their text kept."""
    docs: list[Doc] = []
    block: list[str] | None = None
    start = 0
    with path.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, 1):
            upper = line.upper()
            if "<DOC>" in upper:
                if block is not None:
                    raise GardenError(f"{path}:{number}: <DOC> opened before the <DOC> of line {start} was closed")
                block, start = [line[upper.index("<DOC>") + 5 :]], number
                if "</DOC>" not in upper:
                    continue
                line = block.pop()
                upper = line.upper()
            if block is None:
                if line.strip():
                    raise GardenError(f"{path}:{number}: text outside a <DOC> block: {line.strip()[:60]!r}")
                continue
            if "</DOC>" in upper:
                block.append(line[: upper.index("</DOC>")])
                docs.append(_trec_doc(path, start, "".join(block)))
                block = None
            else:
                block.append(line)
    if block is not None:
        raise GardenError(f"{path}:{start}: <DOC> is never closed")
    return docs


def _trec_doc(path: Path, line: int, body: str) -> Doc:
    match = _DOCNO.search(body)
    if not match or not match.group(1):
        raise GardenError(f"{path}:{line}: <DOC> without a <DOCNO>")
    return Doc(match.group(1), _clean(body[: match.start()] + " " + body[match.end() :]))


_TOP = re.compile(r"<top>(.*?)</top>", re.IGNORECASE | re.DOTALL)
_NUM = re.compile(r"<num>\s*(?:Number:)?\s*([^<\s]+)", re.IGNORECASE)
_TITLE = re.compile(r"<title>\s*(?:Topic:)?(.*?)(?:</title>|<|\Z)", re.IGNORECASE | re.DOTALL)


def read_trec_topics(path: Path) -> dict[str, str]:
    """qid -> lower-cased title. A title may be closed by </title> or by the next tag, as
    in the old TREC ad hoc topics."""
    text = path.read_text(encoding="utf-8", errors="replace")
    topics: dict[str, str] = {}
    for match in _TOP.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        num, title = _NUM.search(match.group(1)), _TITLE.search(match.group(1))
        if not num:
            raise GardenError(f"{path}:{line}: <top> without a <num>")
        if not title or not title.group(1).strip():
            raise GardenError(f"{path}:{line}: topic {num.group(1)} has no <title> text")
        if num.group(1) in topics:
            raise GardenError(f"{path}:{line}: topic {num.group(1)} appears twice")
        topics[num.group(1)] = " ".join(title.group(1).split()).lower()
    if not topics:
        raise GardenError(f"{path}: no <top> blocks found")
    return topics


def read_trec_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            fields = line.split()
            if len(fields) != 4:
                raise GardenError(f"{path}:{number}: expected 'qid iteration docno relevance', got {line.strip()!r}")
            qid, _, docno, rel = fields
            _judge(qrels, qid, docno, rel, f"{path}:{number}: relevance")
    return qrels


def _judge(qrels: dict[str, dict[str, int]], qid: str, doc: str, rel: str, where: str) -> None:
    """Record one judgment; `where` names the file, line and column in the error."""
    try:
        qrels.setdefault(qid, {})[doc] = int(rel)
    except ValueError:
        raise GardenError(f"{where} must be an integer, got {rel!r}") from None


def load_trec(root: Path) -> Collection:
    files = sorted(p for p in (root / "corpus").iterdir() if p.is_file() and not p.name.startswith("."))
    if not files:
        raise GardenError(f"{root / 'corpus'}: no corpus files")
    docs = [doc for f in files for doc in read_trec_docs(f)]
    _check_unique(docs, root / "corpus")
    topics = read_trec_topics(_first_existing(root, TREC_TOPIC_FILES, "topics"))
    qrels = read_trec_qrels(_first_existing(root, TREC_QRELS_FILES, "qrels"))
    return Collection(root.name, docs, topics, qrels)


def _check_unique(docs: list[Doc], where: Path) -> None:
    seen: set[str] = set()
    for doc in docs:
        if doc.id in seen:
            raise GardenError(f"{where}: document id {doc.id!r} appears twice")
        seen.add(doc.id)


# --- BEIR ----------------------------------------------------------------------------


def _jsonl(path: Path, fields: tuple[str, ...]):
    if not path.is_file():
        raise GardenError(f"{path}: missing")
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise GardenError(f"{path}:{number}: not JSON ({exc.msg})") from None
            if not isinstance(record, dict):
                raise GardenError(f"{path}:{number}: expected a JSON object")
            for name in fields:
                if name not in record:
                    raise GardenError(f"{path}:{number}: field {name!r} missing")
            yield record


def read_beir_qrels(path: Path) -> dict[str, dict[str, int]]:
    if not path.is_file():
        raise GardenError(f"{path}: missing")
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            fields = line.rstrip("\n").split("\t")
            if number == 1 and fields and not fields[-1].strip().lstrip("-").isdigit():
                continue  # the header: query-id, corpus-id, score
            if not line.strip():
                continue
            if len(fields) != 3:
                raise GardenError(f"{path}:{number}: expected 'query-id<TAB>corpus-id<TAB>score', got {line.strip()!r}")
            qid, docid, rel = (f.strip() for f in fields)
            _judge(qrels, qid, docid, rel, f"{path}:{number}: score")
    return qrels


def load_beir(root: Path) -> Collection:
    docs = []
    for record in _jsonl(root / "corpus.jsonl", ("_id", "text")):
        title = str(record.get("title") or "").strip()
        text = str(record["text"])
        docs.append(Doc(str(record["_id"]), f"{title} {text}" if title else text))
    _check_unique(docs, root / "corpus.jsonl")
    qrels = read_beir_qrels(root / "qrels" / "test.tsv")
    queries = {
        str(r["_id"]): " ".join(str(r["text"]).split()).lower()
        for r in _jsonl(root / "queries.jsonl", ("_id", "text"))
    }
    # BEIR ships every split's queries in one file; the test split is the one judged.
    queries = {qid: text for qid, text in queries.items() if qid in qrels}
    return Collection(root.name, docs, queries, qrels)
