"""A query's inputs are read in one place (garden/formats/query_inputs.py): the command
line, the API and a server refuse the same input with the same line, each door adding
only its own frame (the parser's flag, the request's field and status)."""
from __future__ import annotations

import pytest

from garden import api
from garden.cli import main
from garden.errors import GardenError

TEXT = "What did the studio rent change to?"

# (the input as the API takes it, as a request's field, as the command line's flags, the line)
REFUSED = [
    ({"budget": 0}, {"budget": 0}, ["--budget", "0"], "a positive whole number of characters, got 0"),
    ({"as_of": "2030-13-01"}, {"as_of": "2030-13-01"}, ["--as-of", "2030-13-01"],
     "not a date (YYYY-MM-DD, from 0001-01-01 to 9999-12-31): '2030-13-01'"),
    # an ISO form that is not YYYY-MM-DD is refused at every door alike
    ({"as_of": "20300106"}, {"as_of": "20300106"}, ["--as-of", "20300106"], "not a date (YYYY-MM-DD"),
    ({"settings": {"standout": 0.5}}, {"settings": {"standout": 0.5}}, ["--standout", "0.5"],
     "standout must be a ratio of at least 1"),
    ({"pipeline": "default:exchange_share=2"}, {"pipeline": "default:exchange_share=2"},
     ["--pipeline", "default:exchange_share=2"], "setting exchange_share must be a finite number from 0 to 1"),
    ({"pipeline": "bm25", "settings": {"standout": 1.2}}, {"pipeline": "bm25", "settings": {"standout": 1.2}},
     ["--pipeline", "bm25", "--standout", "1.2"], "settings: pipeline bm25 has no stage that uses 'standout'"),
]


def exit_code(args: list[str]) -> int:
    """The command's exit code, whether the parser refused a flag (argparse exits) or the
    library refused a value (main returns)."""
    try:
        return main(args)
    except SystemExit as exc:
        return exc.code


@pytest.fixture
def served(project):
    from garden.serve._core import Garden, Shelf, served_pipelines

    return Garden(Shelf.open(["kiln-lane"], root=project),
                  pipelines=served_pipelines(["bm25", "default"]))


@pytest.mark.parametrize("given, field, flags, line", REFUSED)
def test_the_three_doors_refuse_an_input_with_the_same_line(project, capsys, served, given, field, flags, line):
    from garden.serve._core import RequestError

    with pytest.raises(GardenError) as by_api:
        api.query("kiln-lane", TEXT, **given)
    assert line in by_api.value.messages[0]

    assert exit_code(["query", "kiln-lane", TEXT, *flags]) == 2
    assert line in capsys.readouterr().err

    if field.get("pipeline", "default") in served.served:   # a server serves only its operator's names
        with pytest.raises(RequestError) as by_server:
            served.query({"story": "kiln-lane", "text": TEXT, **field})
        assert by_server.value.status == 422 and line in by_server.value.message
        assert by_server.value.field == ("settings" if "settings" in field else next(iter(field)))


def test_a_server_adds_its_own_bound_to_the_budget_the_library_reads(project, served):
    from garden.serve._core import MAX_BUDGET, RequestError

    with pytest.raises(RequestError) as caught:
        served.query({"story": "kiln-lane", "text": TEXT, "budget": MAX_BUDGET + 1})
    assert caught.value.field == "budget" and f"at most {MAX_BUDGET:,} characters in a request" in caught.value.message
    assert api.query("kiln-lane", TEXT, pipeline="bm25", budget=MAX_BUDGET + 1)["budget"]["limit"] == MAX_BUDGET + 1

