"""How long `garden compare` takes on a LongMemEval file of the S file's shape, cold (an empty
garden home: every turn embedded, every index built) and warm (the same home again: the
embedding cache and the saved indexes filled), for `bm25s` (the reference) and `default`.

The released files are not shipped, so the file is written here, fictional from end to
end, in the released schema and at the S file's shape by default: 500 questions, 48
sessions a haystack drawn from a shared pool (a session id in many haystacks, with the same
turns), about 10 turns a session, user turns of 20-60 words and assistant turns of 60-240,
the six question types and 30 abstention questions. Its words are drawn from a made-up
vocabulary, so what it measures is the cost of the machinery, not of any ranking's
quality. `--questions` shrinks it (the per-question figures are what scale).

    .venv/bin/python experiments/longmemeval_speed.py [--questions 500] [--out experiments/out]

Each run is `compare_longmemeval` in this process, as `garden compare FILE --pipelines
bm25s,default` runs it, with the packets; the figures are wall-clock seconds for the whole
comparison and milliseconds per question of each pipeline's ranking (medians are not
taken: one comparison is one run; quote the ratio default / bm25s).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import sys
import tempfile
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
if str(PROJECT) not in sys.path:
    sys.path.insert(0, str(PROJECT))

from experiments.harness.benchmarks import OUT  # noqa: E402
from experiments.harness.results import write_json  # noqa: E402
from experiments.harness.timing import timed  # noqa: E402

TYPES = ("single-session-user", "single-session-assistant", "single-session-preference",
         "multi-session", "temporal-reasoning", "knowledge-update")
SYLLABLES = ("bra", "mor", "tel", "quin", "sa", "dro", "vek", "lun", "pha", "orr", "ist", "kal", "ne", "tob",
             "ral", "sim", "ul", "gor", "ea", "fen", "wick", "dal", "mi", "zor")
COMMON = ("the", "a", "and", "to", "of", "I", "you", "it", "is", "for", "with", "my", "that", "on", "can",
          "about", "what", "how", "some", "would", "like", "this", "was", "we", "there")
COLOURS = ("ochre", "teal", "umber", "saffron", "slate", "moss", "coral", "indigo")
OBJECTS = ("rowboat", "garden shed", "front door", "bicycle", "bookcase", "kayak", "mailbox", "loom")


def vocabulary(rng: random.Random, size: int = 6000) -> list[str]:
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))))
    return sorted(words)


def sentence(rng: random.Random, vocab: list[str], words: int) -> str:
    return " ".join(rng.choice(COMMON) if rng.random() < 0.45 else rng.choice(vocab) for _ in range(words)) + "."


def session(rng: random.Random, vocab: list[str], turns: int) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant",
             "content": sentence(rng, vocab, rng.randint(20, 60) if i % 2 == 0 else rng.randint(60, 240))}
            for i in range(turns)]


def stamp(day: dt.datetime) -> str:
    return day.strftime("%Y/%m/%d (%a) %H:%M")


def write_file(path: Path, questions: int, sessions: int = 48, seed: int = 0) -> dict:
    """A fictional file of the S file's shape; returns what it holds."""
    rng = random.Random(seed)
    vocab = vocabulary(rng)
    pool_size = max(sessions, questions * (sessions - 1) * 4 // 5)
    base = dt.datetime(2031, 1, 1, 9, 0)
    pool: dict[int, list[dict]] = {}
    slots = 0
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("[")
        for n in range(questions):
            qtype = TYPES[n % len(TYPES)]
            abstention = n % (max(1, questions // 30)) == 0 and n > 0
            obj, colour = rng.choice(OBJECTS), rng.choice(COLOURS)
            evidence = session(rng, vocab, rng.randint(8, 12))
            if not abstention:
                evidence.insert(2, {"role": "user", "content": f"I painted the {obj} {colour} last weekend.",
                                    "has_answer": True})
            picks = rng.sample(range(pool_size), sessions - 1)
            haystack = []
            for p in picks:
                if p not in pool:
                    pool[p] = session(random.Random(seed * 1_000_003 + p), vocab, rng.randint(8, 12))
                haystack.append((f"sharegpt_pool{p}_0", pool[p]))
            where = rng.randrange(len(haystack) + 1)
            haystack.insert(where, (f"answer_synth{n}_1", evidence))
            days = sorted(rng.sample(range(300), len(haystack)))
            slots += len(haystack)
            record = {
                "question_id": f"synth{n}" + ("_abs" if abstention else ""),
                "question_type": qtype,
                "question": f"What colour did I paint the {obj}?",
                "answer": colour,
                "question_date": stamp(base + dt.timedelta(days=310)),
                "haystack_session_ids": [sid for sid, _ in haystack],
                "haystack_dates": [stamp(base + dt.timedelta(days=d)) for d in days],
                "haystack_sessions": [turns for _, turns in haystack],
                "answer_session_ids": [f"answer_synth{n}_1"],
            }
            fh.write(("," if n else "") + json.dumps(record))
        fh.write("]")
    return {"questions": questions, "slots": slots, "distinct_pool_sessions": len(pool),
            "bytes": path.stat().st_size}


def compared(path: Path, home: Path) -> dict:
    from garden.evaluation.longmemeval import compare_longmemeval

    os.environ["GARDEN_HOME"] = str(home)
    seconds, report = timed(lambda: compare_longmemeval(path, ["bm25s", "default"], "bm25s", plot=home / "plot.png"))
    return {"seconds": seconds, "ms_per_question": report.ms_per_query,
            "success@5": {p: v["Success@5"] for p, v in report.turn.evaluation.aggregates.items()}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=500)
    ap.add_argument("--sessions", type=int, default=48)
    ap.add_argument("--out", default=str(OUT), help=f"where the figures are saved (default {OUT})")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="longmemeval-speed-") as tmp:
        tmp = Path(tmp)
        path = tmp / "longmemeval_synthetic_s.json"
        seconds, shape = timed(lambda: write_file(path, args.questions, args.sessions))
        shape["write_seconds"] = seconds
        print(f"wrote {shape}", flush=True)
        cold = compared(path, tmp / "home")
        print(f"cold {cold}", flush=True)
        warm = compared(path, tmp / "home")
        print(f"warm {warm}", flush=True)
    ratio = {kind: run["ms_per_question"]["default"] / run["ms_per_question"]["bm25s"]
             for kind, run in (("cold", cold), ("warm", warm))}
    result = {"shape": shape, "cold": cold, "warm": warm, "default_over_bm25s": ratio, "cores": os.cpu_count()}
    print(json.dumps(result, indent=2))
    write_json(Path(args.out) / f"longmemeval_speed_{args.questions}.json", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
