"""Loading TREC and BEIR collections, and the located errors bad input gets."""
import json

import pytest

from garden.formats.corpora import Collection, load_collection
from garden.errors import GardenError
from garden.retrievers import Doc

CORPUS_A = """<DOC>
<DOCNO>10</DOCNO>
Compact memories have
flexible capacities
</DOC>

<DOC>
<DOCNO> 11 </DOCNO>
<TEXT>An electronic <B>analogue</B> computer</TEXT>
</DOC>
"""
CORPUS_B = "<DOC><DOCNO>12</DOCNO> one line document </DOC>\n"
TOPICS = """<top>
<num>1</num><title>
MEASUREMENT OF Dielectric   CONSTANT
</title>
</top>
<top>
<num> Number: 2
<title> Topic: Analogue Computers
<desc> Description: not part of the query
</top>
"""
QRELS = "1 0 10 1\n1 0 11 0\n\n2 0 11 2\n"


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def trec(tmp_path):
    root = tmp_path / "tiny-trec"
    write(root / "corpus" / "a.trec", CORPUS_A)
    write(root / "corpus" / "b.trec", CORPUS_B)
    write(root / "query-text.trec", TOPICS)
    write(root / "qrels", QRELS)
    return root


@pytest.fixture
def beir(tmp_path):
    root = tmp_path / "tiny-beir"
    write(root / "corpus.jsonl", "\n".join(json.dumps(r) for r in [
        {"_id": "d1", "title": "Walrus", "text": "keeps a lantern"},
        {"_id": "d2", "title": "", "text": "chocolate cake"},
        {"_id": "d3", "text": "stock market"},
    ]) + "\n")
    write(root / "queries.jsonl", "\n".join(json.dumps(r) for r in [
        {"_id": "q1", "text": "Where is the LANTERN?"},
        {"_id": "q2", "text": "cake"},
        {"_id": "q9", "text": "a training query with no test judgments"},
    ]) + "\n")
    write(root / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t2\nq2\td3\t0\n")
    return root


def test_trec_layout_reads_every_corpus_file(trec):
    collection = load_collection(trec)
    assert isinstance(collection, Collection)
    assert collection.name == "tiny-trec"
    assert collection.docs == [
        Doc("10", "Compact memories have flexible capacities"),
        Doc("11", "An electronic analogue computer"),  # tags dropped, their text kept
        Doc("12", "one line document"),
    ]


def test_trec_topics_are_lower_cased_titles(trec):
    assert load_collection(trec).queries == {"1": "measurement of dielectric constant", "2": "analogue computers"}


def test_trec_qrels_keep_graded_relevance(trec):
    assert load_collection(trec).qrels == {"1": {"10": 1, "11": 0}, "2": {"11": 2}}


def test_beir_layout(beir):
    collection = load_collection(beir)
    assert collection.name == "tiny-beir"
    assert collection.docs == [Doc("d1", "Walrus keeps a lantern"), Doc("d2", "chocolate cake"),
                               Doc("d3", "stock market")]
    # lower-cased, and only the queries the test split judges
    assert collection.queries == {"q1": "where is the lantern?", "q2": "cake"}
    assert collection.qrels == {"q1": {"d1": 1}, "q2": {"d2": 2, "d3": 0}}


def test_judged_queries(trec):
    collection = load_collection(trec)
    collection.qrels.pop("2")
    assert collection.judged_queries == {"1": "measurement of dielectric constant"}


def test_a_bad_qrels_line_names_file_and_line(trec):
    write(trec / "qrels", "1 0 10 1\n1 0 11\n")
    with pytest.raises(GardenError, match=r"qrels:2: expected 'qid iteration docno relevance'") as error:
        load_collection(trec)
    assert str(trec / "qrels") in str(error.value)
    assert error.value.status == 2


def test_a_non_integer_relevance_names_file_and_line(trec):
    write(trec / "qrels", "1 0 10 1\n\n1 0 11 yes\n")
    with pytest.raises(GardenError, match=r"qrels:3: relevance must be an integer, got 'yes'"):
        load_collection(trec)


def test_a_folder_missing_its_qrels_says_so(trec):
    (trec / "qrels").unlink()
    with pytest.raises(GardenError, match="no qrels file") as error:
        load_collection(trec)
    assert str(trec) in str(error.value)


def test_a_folder_missing_its_topics_says_so(trec):
    (trec / "query-text.trec").unlink()
    with pytest.raises(GardenError, match="no topics file"):
        load_collection(trec)


def test_an_unclosed_doc_names_its_line(trec):
    write(trec / "corpus" / "b.trec", "\n<DOC>\n<DOCNO>12</DOCNO>\ntext\n")
    with pytest.raises(GardenError, match=r"b\.trec:2: <DOC> is never closed"):
        load_collection(trec)


def test_a_doc_without_docno_names_its_line(trec):
    write(trec / "corpus" / "b.trec", "<DOC>\nno number here\n</DOC>\n")
    with pytest.raises(GardenError, match=r"b\.trec:1: <DOC> without a <DOCNO>"):
        load_collection(trec)


def test_text_outside_a_doc_is_an_error(trec):
    write(trec / "corpus" / "b.trec", "<DOC><DOCNO>12</DOCNO> x </DOC>\nstray words\n")
    with pytest.raises(GardenError, match=r"b\.trec:2: text outside a <DOC> block"):
        load_collection(trec)


def test_a_document_id_used_twice_is_an_error(trec):
    write(trec / "corpus" / "b.trec", "<DOC><DOCNO>10</DOCNO> again </DOC>\n")
    with pytest.raises(GardenError, match="document id '10' appears twice"):
        load_collection(trec)


def test_a_beir_line_that_is_not_json_names_file_and_line(beir):
    with (beir / "queries.jsonl").open("a") as out:
        out.write("{not json\n")
    with pytest.raises(GardenError, match=r"queries\.jsonl:4: not JSON"):
        load_collection(beir)


def test_a_beir_record_missing_its_id_names_file_and_line(beir):
    write(beir / "corpus.jsonl", '{"_id": "d1", "text": "x"}\n{"text": "no id"}\n')
    with pytest.raises(GardenError, match=r"corpus\.jsonl:2: field '_id' missing"):
        load_collection(beir)


def test_a_bad_beir_qrels_line_names_file_and_line(beir):
    write(beir / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2 d2 1\n")
    with pytest.raises(GardenError, match=r"test\.tsv:3: expected"):
        load_collection(beir)


def test_a_beir_folder_missing_its_qrels_says_so(beir):
    (beir / "qrels" / "test.tsv").unlink()
    with pytest.raises(GardenError, match=r"test\.tsv: missing"):
        load_collection(beir)


def test_an_unknown_layout_is_refused(tmp_path):
    with pytest.raises(GardenError, match="not a known collection layout"):
        load_collection(tmp_path)
    with pytest.raises(GardenError, match="not a folder"):
        load_collection(tmp_path / "absent")
