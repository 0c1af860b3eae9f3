"""Variants by name: stage settings written into a structured pipeline's name
(`default:exchange_share=0.5`) are the defaults its queries run with, checked as a
retriever's options are, wherever a pipeline name goes. On the fictional chat
fixtures/merrowby-messages.yaml, where the exchange stage's share moves what is packed."""
from __future__ import annotations

import datetime as dt
import json

import pytest

from garden import api
from garden.cli import main
from garden.errors import GardenError
from garden.pipelines import check_pipeline, describe_pipeline, make_pipeline, split_structured
from garden.rerank.query import QuerySpec
from garden.rerank.stages import Settings

AS_OF = dt.date(2031, 6, 1)
# questions of the chat whose packets the exchange stage changes: a reply that shares no
# word with the question it answers rides with it once the stage is on
QUESTIONS = ("what did you end up naming the boat", "Did the market have blood oranges?",
             "What is Odile making with the fennel?")


def packets(pipeline: str, settings: Settings | None = None) -> list:
    story = api.load_story("merrowby-messages")
    made = make_pipeline(pipeline)
    return [made.run(QuerySpec(story, q, AS_OF, 300, settings=settings or Settings())).packet for q in QUESTIONS]


def test_a_named_variant_packs_what_its_settings_given_to_each_query_pack(project):
    named = packets("default:exchange_share=0.5")
    assert named == packets("default", Settings(exchange_share=0.5))
    assert named != packets("default")   # the setting matters on this story: the test could fail


def test_what_a_query_gives_wins_over_what_the_name_gives(project):
    assert packets("default:exchange_share=0.5@bm25s", Settings(exchange_share=0.0)) == packets("default@bm25s")


def test_the_api_takes_a_variant_wherever_it_takes_a_name(project):
    text = QUESTIONS[0]
    named = api.query("merrowby-messages", text, pipeline="default:exchange_share=0.5@bm25s", budget=300)
    given = api.query("merrowby-messages", text, pipeline="default@bm25s", budget=300,
                      settings={"exchange_share": 0.5})
    assert named == given and named != api.query("merrowby-messages", text, pipeline="default@bm25s", budget=300)


@pytest.mark.parametrize("name, parts", [
    ("default", ("default", frozenset(), "hybrid", ())),
    ("default-phrase-standout", ("default", frozenset({"phrase", "standout"}), "hybrid", ())),
    # after the @ everything is the retriever's, as before: k1 is bm25s's option, no setting
    ("default@bm25s:k1=1.2", ("default", frozenset(), "bm25s:k1=1.2", ())),
    ("default-phrase@hybrid:retrievers=bm25s+tfidf",
     ("default", frozenset({"phrase"}), "hybrid:retrievers=bm25s+tfidf", ())),
    ("default:exchange_share=0.5", ("default", frozenset(), "hybrid", (("exchange_share", "0.5"),))),
    ("default-phrase:standout=1.2:lane_cap=4@bm25s:k1=1.2",
     ("default", frozenset({"phrase"}), "bm25s:k1=1.2", (("standout", "1.2"), ("lane_cap", "4")))),
])
def test_the_grammar_keeps_every_name_valid_before_it(name, parts):
    assert split_structured(check_pipeline(name)) == parts
    made = make_pipeline(name)
    assert made.name == name and made.retriever_name == parts[2]
    assert made.settings.model_dump(exclude_none=True) == {k: float(v) if k != "lane_cap" else int(v)
                                                           for k, v in parts[3]}


def test_a_bare_name_is_no_variant():
    assert split_structured("bm25:variant=plus:k1=1.2") is None
    assert describe_pipeline("default-phrase:standout=1.2@bm25s").endswith("without phrase, settings standout=1.2")


@pytest.mark.parametrize("name, line", [
    ("default:exchange_share=2", "pipeline 'default:exchange_share=2': setting exchange_share must be a finite "
                                 "number from 0 to 1 (got '2')"),
    ("default:exchange_share=nan", "setting exchange_share must be a finite number from 0 to 1 (got 'nan')"),
    ("default:lane_cap=1.5", "setting lane_cap must be a whole number >= 1 (got '1.5')"),
    ("default:standout=0.5", "setting standout: standout must be a ratio of at least 1"),
    ("default:exchange_shar=0.5", "no stage declares a setting named 'exchange_shar'; did you mean exchange_share?"),
    ("default-exchange:exchange_share=0.5", "pipeline 'default-exchange:exchange_share=0.5': no stage of it uses "
                                            "exchange_share (read by exchange, which the name removes)"),
    ("default:exchange_share", "a setting is written NAME=VALUE, got 'exchange_share'"),
    ("default:standout=2:standout=3", "setting standout is given twice"),
    ("default@bm25s:standout=2", "standout is a stage setting, not an option of the retriever"),
])
def test_a_bad_variant_is_refused_in_one_line(name, line):
    with pytest.raises(GardenError) as caught:
        check_pipeline(name)
    assert any(line in message for message in caught.value.messages)
    assert all("\n" not in message for message in caught.value.messages)


@pytest.mark.parametrize("command", [
    ["query", "merrowby-messages", "naming the boat", "--pipeline", "NAME"],
    ["compare", "challenge/reply-without-words.yaml", "--pipelines", "default,NAME"],
    ["ablate", "challenge/reply-without-words.yaml", "--pipeline", "NAME"],
    ["contrast", "challenge/reply-without-words.yaml", "--pipelines", "NAME"],
    ["run", "challenge/reply-without-words.yaml", "--pipeline", "NAME"],
])
@pytest.mark.parametrize("name, needle", [
    ("default:exchange_share=2", "must be a finite number from 0 to 1"),
    ("default:exchange_shar=0.5", "no stage declares a setting named 'exchange_shar'"),
    ("default-exchange:exchange_share=0.5", "no stage of it uses exchange_share"),
])
def test_the_command_line_refuses_a_bad_variant_in_one_line_exit_2(project, capsys, command, name, needle):
    code = main([name if arg == "NAME" else arg.replace("NAME", name) for arg in command])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and needle in err and name in err


def test_compare_shows_each_variant_as_a_column_of_its_own(project, capsys):
    variant = "default:exchange_share=0.5@bm25s"
    code = main(["compare", "challenge/reply-without-words.yaml", "--pipelines", f"default@bm25s,{variant}", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert set(report["pipelines"]) == {"default@bm25s", variant}


def test_an_ablation_of_a_variant_drops_the_settings_of_the_stage_it_removes(project):
    from garden.evaluation.ablate import ablate

    result = ablate("challenge/reply-without-words.yaml", full="default:exchange_share=0.5@bm25s",
                    stages=["exchange", "phrase"])
    assert result.variants == {"exchange": "default-exchange@bm25s",
                               "phrase": "default-phrase:exchange_share=0.5@bm25s"}


def test_contrast_puts_a_variant_beside_default_and_not_among_the_baselines(project):
    from garden.evaluation.runner import contrast

    variant = "default:exchange_share=0.5@bm25s"
    report = contrast(["challenge/reply-without-words.yaml"], [variant])
    assert report.pipelines[-2:] == ["default", variant]
    assert variant not in report.baselines_failing("reply-without-words")


def test_a_server_serves_the_variants_its_operator_names(home):
    from garden.serve._core import served_pipelines

    served = served_pipelines(["default:exchange_share=0.5@bm25s"])
    assert served["default:exchange_share=0.5@bm25s"].settings == Settings(exchange_share=0.5)
    with pytest.raises(GardenError, match="--pipelines default:exchange_share=2: pipeline 'default:exchange_share=2'"):
        served_pipelines(["default:exchange_share=2"])


def test_a_trace_names_the_variant_as_given(project, capsys):
    variant = "default:exchange_share=0.5@bm25s"
    assert main(["query", "merrowby-messages", QUESTIONS[0], "--pipeline", variant, "--as-of", "2031-06-01"]) == 0
    [path] = api.trace_files()
    events = [json.loads(line) for line in open(path, encoding="utf-8")]
    # the name carries the settings; the event's own settings stay those the query gave
    assert [e["pipeline"] for e in events] == [variant]
    assert {k: v for k, v in events[0]["settings"].items() if v is not None} == {}


def test_a_variant_ranks_as_it_packs(project):
    # a collection's comparison ranks rather than packs: the name's settings reach that run too
    story = api.load_story("merrowby-messages")

    def ranked(pipeline: str, **given) -> list:
        spec = QuerySpec(story, QUESTIONS[0], AS_OF, settings=Settings(candidates=50, **given))
        return make_pipeline(pipeline).ranking(spec, 50).by_relevance(10)

    named = ranked("default:exchange_share=0.5@bm25s")
    assert named == ranked("default@bm25s", exchange_share=0.5) and named != ranked("default@bm25s")
