"""`garden generate`: a fictional story of any size, valid by construction, with its cases.

The story has the shape of a real store: several projects whose role entities share an
alias word ("the warden"), topics with related links and aliases, sources and the chunks
cut from them, notes and views citing what they restate, states with review checkpoints
and confirmations, decision chains with supersession, private notes, control records,
and text in English, Chinese and a mix of both. Into that filler a bounded set of
scenarios is planted, each the generated twin of a hand-written Aurora Ridge contrast:

- changed-choice: an old choice and the one that replaced it; asked why the old one was
  chosen, the successor leads and the old one rides right behind it as history; a
  replaced state value is never served;
- supersession-chain: three decisions in a row, packed newest first;
- checkpoint: a state whose review checkpoint passed unconfirmed carries the note and
  keeps its rank; before it was observed it does not exist;
- similar-wording: two states of one person with the same negative shape on different
  topics; the topic keeps the wrong one out;
- scoped-entity and ambiguous-entity: two projects' roles share their last word; the
  full alias scopes the query, the bare word alone is asked about;
- named-phrase (a few): a camp log written mostly in Chinese names a three-word phrase;
  a chatty look-alike repeats the query's filler and holds the words apart, a sticker
  holds them hyphen-joined, an index view restates the phrase;
- gate-doors: a private note and a log written after `as_of` match the query as well as
  the answer; a decision's sources name a control record and a private note.

Every expectation of a generated case follows from what was planted (which record
answers, which one is history, which one is out of scope or private), and every case is
a contrast: `default` passes it, and the bare retrievers fall into it (see
docs/generated-stories.md).

Everything is drawn from one `random.Random(seed)`: the same name, size and seed give the
same bytes. No wall clock: dates are counted from a fixed base date, shifted by the seed.

Streaming: the header is written first, then every record as it is made, each an
independent YAML list item. What later records or cases refer to is a bounded set: the
planted scenarios (a few dozen records, whatever the size), the last few filler ids a
chunk, note or view may cite, and the story's tables. The whole story is never held.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import random
import re
import shutil
import tempfile
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from garden.formats.layout import CASES_FOLDER, STORY_FOLDER
from garden.errors import GardenError
from garden.formats.jsonl_reader import SUFFIX as JSONL
from garden.formats.locomo import dump_yaml
from garden.formats.stories import STORY_NAME
from garden._terminal import Progress, counted
from garden.text import shown

MIN_RECORDS = 200          # the planted scenarios take ~40 records; the rest is filler around them
MAX_RECORDS = 10_000_000   # a bound on the request, not on what streaming can write
# The YAML reader refuses files over 4 MiB (its hostile-input bound); a generated record
# averages about 230 bytes of YAML, so past this many records the story goes to JSON Lines.
MAX_YAML_RECORDS = 10_000
BASE_DATE = dt.date(2041, 1, 1)   # day 0 of every generated story, shifted by up to a year by the seed
SPAN_DAYS = 150            # filler and planted records fall within days 0..SPAN_DAYS
AS_OF_DAY = 160            # the cases' "now": after every record but the one written too late
LATE_DAY = 170             # the one record written after as_of (the time door)
RECENT = 8                 # filler ids kept for chunks, notes and views to cite

# --- word pools (all invented: no real people, places or projects) ----------------------

PLACE_HEADS = ["Kestrel", "Moss", "Tarn", "Brindle", "Saffron", "Otter", "Heron", "Lark", "Cinder",
               "Willow", "Amber", "Fallow", "Rook", "Bracken", "Sorrel", "Gannet"]
PLACE_TAILS = ["fen", "gate", "hollow", "quay", "weir", "brook", "moor", "reach", "combe", "holt", "mere"]
PROJECT_KINDS = ["survey", "crossing", "station", "dig", "lighthouse", "orchard"]
ROLES = ["warden", "steward", "reeve", "bosun"]
# no qualifier is a topic alias or a phrase word: a query naming the role must resolve the role alone
ROLE_QUALIFIERS = ["orchard", "quarry", "granary", "ferry", "mill", "apiary", "tannery", "pier"]
FIRST_NAMES = ["Ysolde", "Bram", "Tamsin", "Odile", "Corvin", "Maelis", "Idris", "Senna", "Perrin",
               "Alwen", "Rowan", "Linnea", "Oswin", "Petra", "Caspian", "Wrenna", "Teodor", "Ilse"]
SURNAMES = ["Marrowby", "Quillfeather", "Ashgrove", "Tallowmere", "Fenwright", "Brackwater",
            "Stellholm", "Oakhollow", "Pennycress", "Vantreu", "Thornquill", "Emberlow", "Gravenrook",
            "Hollisweft"]   # two people per project (five at most), and one more

# changed-choice: (old, new) ways of keeping a log, and the log's subject
OLD_WAYS = ["paper ledger", "chalk slate", "knotted cord", "clay tokens", "reed scroll"]
NEW_WAYS = ["offline tablet", "enamel board", "punch cards", "wax cylinder", "card index"]
LOG_SUBJECTS = ["tide", "lichen", "pollen", "seismograph", "beehive", "snowpack"]
# supersession-chain: a device and the fuels it burned in turn
DEVICES = ["camp stove", "drying kiln", "smithy forge", "bathhouse boiler", "signal brazier"]
FUELS = ["kerosene", "propane", "driftwood", "peat", "charcoal", "tallow", "coal", "birch bark"]
# checkpoint / similar-wording: an activity (a topic) and a food (another topic)
ACTIVITIES = [("chess", "playing chess"), ("fiddle", "playing the fiddle"), ("kites", "flying kites"),
              ("puzzles", "doing puzzles"), ("sketching", "sketching birds")]
FOODS = [("buttermilk", "drinking buttermilk"), ("nettle tea", "drinking nettle tea"),
         ("porridge", "eating porridge"), ("herring", "eating pickled herring")]
SLEEP_HOURS = ["in the afternoon", "after the dawn chores", "from noon until four"]
# scoped entities: what each project's role decides about a shared watch topic
WATCHES = [("night watch", "night_watch"), ("ice watch", "ice_watch"), ("fog watch", "fog_watch")]
HAZARDS = ["pack ice", "river fog", "loose scree", "high water"]
# named phrases: three Latin words, held nowhere else in the story
# (the families' words are kept apart, stems included: a test checks it)
PHRASE_A = ["glacier", "lantern", "copper", "thistle", "juniper", "meadow", "cobalt"]
PHRASE_B = ["custard", "walrus", "kettle", "pudding", "bellows", "marmalade", "teapot"]
PHRASE_C = ["incident", "affair", "parade", "mishap", "episode", "rebellion"]
PHRASE_PLACES = ["冰川", "码头", "山坡", "湖面", "屋顶"]
COMMON_SPAN = "camp stove"   # a span planted in several logs: too common to earn phrase credit
# gate doors
SIGNALS = ["conch horn", "bell buoy", "brass gong", "steam whistle"]
LANDINGS = ["north landing", "east jetty", "weir steps", "rush wharf"]

# filler topics: (id, aliases, nouns the text draws from); none shares a word with a planted query
FILLER_TOPICS = [
    ("rigging", ["rigging"], ["halyard", "shackle", "block", "sheet line"]),
    ("bread_baking", ["baking", "bread"], ["sourdough", "rye loaf", "oven tray", "proving basket"]),
    ("map_work", ["maps", "map work"], ["contour sheet", "grid square", "compass bearing", "trail marker"]),
    ("radio_checks", ["radio"], ["aerial", "frequency card", "call sign", "handset"]),
    ("water_supply", ["water"], ["cistern", "filter cloth", "melt barrel", "pump handle"]),
    ("boot_repair", ["boots"], ["boot sole", "waxed thread", "hobnail", "insole"]),
    ("weather_notes", ["weather"], ["barometer", "wind vane", "rain gauge", "cloud chart"]),
    ("first_aid", ["first aid"], ["bandage roll", "splint", "salve tin", "sling"]),
    ("laundry", ["laundry"], ["washboard", "drying line", "peg bag", "soap flakes"]),
    ("sled_repair", ["sleds"], ["runner", "lashing", "crossbar", "tow strap"]),
    ("photo_archive", ["photos"], ["negative sleeve", "print box", "lens cap", "film tin"]),
    ("mail_run", ["mail", "letters"], ["mailbag", "parcel", "postcard", "sorting tray"]),
]
FILLER_VERBS = ["checked", "mended", "counted", "cleaned", "moved", "labelled", "sorted", "weighed"]
FILLER_PLACES = ["the store room", "the boat shed", "the main hut", "the south porch", "the workbench",
                 "the upper loft", "the drying room"]
FILLER_TIMES = ["before breakfast", "after supper", "at first light", "during the rain", "on the late shift"]
# Chinese filler, each a clause of camp life; none holds a planted phrase or the look-alike's filler
CJK_CLAUSES = ["今天把柴火搬进了仓库", "晚饭是土豆汤和黑面包", "风很大，大家早早回屋", "修好了漏水的屋顶",
               "下午整理了工具箱", "有人在门口堆了一个雪人", "炉子旁边烤着湿手套", "早上的雾很浓，看不清对岸",
               "补给船晚到了一天", "把旧绳子剪短重新编好", "夜里听见狐狸在外面叫", "地图上又加了一条小路",
               "洗好的衣服挂在屋里晾干", "大家轮流守着无线电", "新的木板已经锯好", "清点了一遍药箱"]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def _dash(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


# --- the plan: what is planted, and the tables ---------------------------------------------


@dataclass
class Plan:
    """Everything a later record or a case refers to: bounded whatever the size."""

    name: str
    records: int
    seed: int
    start: dt.date
    projects: list[tuple[str, str]]              # (id, title)
    topics: dict[str, dict] = field(default_factory=dict)
    entities: dict[str, dict] = field(default_factory=dict)
    people: dict[str, list[str]] = field(default_factory=dict)   # project -> filler person entity ids
    planted: list[dict] = field(default_factory=list)
    cases: list[dict] = field(default_factory=list)

    def day(self, k: int) -> dt.date:
        return self.start + dt.timedelta(days=k)

    @property
    def as_of(self) -> dt.date:
        return self.day(AS_OF_DAY)


def plan_story(name: str, records: int, seed: int) -> Plan:
    """The tables and the planted scenarios, with their cases, drawn from `random.Random(seed)`."""
    rng = random.Random(f"{name}/{seed}")
    start = BASE_DATE + dt.timedelta(days=rng.randrange(366))
    count = 3 if records < 2000 else 4 if records < 20000 else 5
    heads = rng.sample(PLACE_HEADS, count)
    tails = rng.sample(PLACE_TAILS, count)
    kinds = rng.sample(PROJECT_KINDS, count)
    projects = [(_dash(f"{h}{t}"), f"The {h}{t} {k}") for h, t, k in zip(heads, tails, kinds)]
    plan = Plan(name, records, seed, start, projects)
    names = iter(rng.sample(FIRST_NAMES, len(FIRST_NAMES)))
    surnames = iter(rng.sample(SURNAMES, len(SURNAMES)))
    _filler_tables(plan, rng, names, surnames)
    _plant_changed_choice(plan, rng)
    _plant_chain(plan, rng)
    _plant_person(plan, rng, next(names), next(surnames))
    _plant_scoped(plan, rng)
    phrases = 2 if records < 5000 else 3
    _plant_phrases(plan, rng, phrases, next(names))
    _plant_doors(plan, rng)
    return plan


def _filler_tables(plan: Plan, rng: random.Random, names, surnames) -> None:
    for tid, aliases, _ in FILLER_TOPICS:
        plan.topics[tid] = {"aliases": list(aliases)}
    ids = [t[0] for t in FILLER_TOPICS]
    for tid in rng.sample(ids, 4):   # a few related links, one hop
        plan.topics[tid]["related"] = sorted(rng.sample([i for i in ids if i != tid], 2))
    for pid, _ in plan.projects:
        plan.people[pid] = []
        for _ in range(2):
            first, last = next(names), next(surnames)
            eid = _slug(f"{first} {last}")
            plan.entities[eid] = {"name": f"{first} {last}", "aliases": [f"{first} {last}".lower()],
                                  "project": pid}
            plan.people[pid].append(eid)


def _record(plan: Plan, rid: str, kind: str, text: str | None, project: str | None = None, **fields) -> dict:
    """A record dict in a fixed key order (so the bytes are stable)."""
    rec: dict = {"id": rid, "kind": kind}
    if "title" in fields:
        rec["title"] = fields.pop("title")
    if text is not None:
        rec["text"] = text
    for key in ("at", "fidelity", "topics", "entities", "sources", "related"):
        if fields.get(key) not in (None, []):
            rec[key] = fields.pop(key)
        else:
            fields.pop(key, None)
    if project and project != plan.projects[0][0]:
        rec["project"] = project
    for key in ("private", "stability", "status", "superseded_by", "observed_at", "valid_from", "valid_to",
                "last_confirmed_at", "expected_resolution_at", "decided_at", "rationale"):
        if fields.get(key) is not None:
            rec[key] = fields.pop(key)
        else:
            fields.pop(key, None)
    assert not fields, fields
    return rec


def _case(plan: Plan, cid: str, category: str, about: str, query: str, expect: dict,
          controls: list[dict] | None = None, **extra) -> None:
    case = {"id": cid, "story": None, "about": about,
            "origin": f"garden generate {plan.name} --records {plan.records} --seed {plan.seed}: planted {category}",
            "category": category, "as_of": extra.pop("as_of", plan.as_of), "budget": extra.pop("budget", 1200)}
    case.update(extra)
    case["query"] = query
    case["expect"] = expect
    if controls:
        case["controls"] = controls
    plan.cases.append(case)


def _plant_changed_choice(plan: Plan, rng: random.Random) -> None:
    old, new = rng.choice(OLD_WAYS), rng.choice(NEW_WAYS)
    subject = rng.choice(LOG_SUBJECTS)
    topic = f"{subject}_log"
    plan.topics[topic] = {"aliases": [f"{subject} log", f"{subject} readings"]}
    a, b = rng.sample(FIRST_NAMES, 2)
    d0, d1 = 20, 60
    tag = _dash(subject)
    pred, succ = f"decision.{tag}.{_dash(old)}", f"decision.{tag}.{_dash(new)}"
    src0, src1 = f"call.{tag}.day{d0}", f"call.{tag}.day{d1}"
    st0, st1 = f"state.{tag}.{_dash(old)}", f"state.{tag}.{_dash(new)}"
    P = plan.planted
    P.append(_record(plan, pred, "decision", f"The crew chose the {old} for the {subject} readings.",
                     title=f"The {old}", topics=[topic], status="superseded", superseded_by=succ,
                     decided_at=plan.day(d0), sources=[src0],
                     rationale=f"The {old} is simple; it needs no charging and works in any cold."))
    P.append(_record(plan, succ, "decision",
                     f"The crew replaced the {old} with the {new} for every {subject} reading, kept in an "
                     "insulated pouch between entries.",
                     title=f"The {new} replaces the {old}", topics=[topic], status="active",
                     decided_at=plan.day(d1), sources=[src1],
                     rationale=f"Readings must be searchable by date and instrument, and the {new} works "
                               "without a network."))
    P.append(_record(plan, src0, "source", f"{a}: the {old} never runs out of battery at thirty below. "
                     f"{b}: fine, the {old} for the first month.", title=f"Planning call, day {d0}",
                     at=plan.day(d0), topics=[topic]))
    P.append(_record(plan, src1, "source", f"{b}: I spent an hour hunting for one reading in the {old}. "
                     f"{a}: then we move to the {new} today.", title=f"Log review, day {d1}",
                     at=plan.day(d1), topics=[topic]))
    P.append(_record(plan, st0, "state", f"{subject.capitalize()} readings are written in the {old}.",
                     topics=[topic], status="superseded", superseded_by=st1, observed_at=plan.day(d0),
                     valid_from=plan.day(d0), valid_to=plan.day(d1)))
    P.append(_record(plan, st1, "state", f"{subject.capitalize()} readings are entered on the {new}.",
                     topics=[topic], status="active", observed_at=plan.day(d1), valid_from=plan.day(d1)))
    _case(plan, "changed-choice", "supersession",
          f"The {old} was replaced by the {new}: asked why the {old} was chosen, the {new} leads and the "
          f"{old} rides right behind it as history, never as current advice.",
          f"Why did the crew originally choose the {old}?",
          {"decision": "retrieve", "lead": succ, "sequence": [succ, pred],
           "labels": {pred: ["conflicting_or_superseded"]}},
          [{"name": "before the switch the old choice is current, not history", "as_of": plan.day(40),
            "expect": {"lead": pred, "exclude": [succ], "absent_labels": {pred: ["conflicting_or_superseded"]}}},
           {"name": "a replaced state value is never served as current",
            "query": f"Where are the {subject} readings entered now?",
            "expect": {"include": [st1], "exclude": [st0], "rejected": {st0: "superseded_state"}}}])


def _plant_chain(plan: Plan, rng: random.Random) -> None:
    pid = plan.projects[1][0]
    device = rng.choice(DEVICES)
    f1, f2, f3 = rng.sample(FUELS, 3)
    topic = _slug(device)
    plan.topics[topic] = {"aliases": [device.split()[-1], f"{device.split()[-1]}s"]}
    tag = _dash(device)
    ids = [f"decision.{tag}.{_dash(f)}" for f in (f1, f2, f3)]
    days = [25, 50, 90]
    texts = [(f"The {device} burns {f1}.", f"{f1.capitalize()} was what the supply boat carried."),
             (f"The {device} was switched to {f2}.", f"{f1.capitalize()} fumes filled the hut."),
             (f"The {device} now burns {f3} gathered on the shore walk.",
              f"{f2.capitalize()} ran short below twenty-five degrees.")]
    for i, (rid, (text, why)) in enumerate(zip(ids, texts)):
        last = i == 2
        plan.planted.append(_record(plan, rid, "decision", text, pid, topics=[topic],
                                    status="active" if last else "superseded",
                                    superseded_by=None if last else ids[i + 1],
                                    decided_at=plan.day(days[i]), rationale=why))
    _case(plan, "supersession-chain", "supersession",
          f"A chain of two hops ({f1}, then {f2}, then {f3}): each superseded decision rides right behind "
          "its direct successor, newest first.",
          f"Why did the {device} burn {f1} at first?",
          {"lead": ids[2], "sequence": [ids[2], ids[1], ids[0]],
           "labels": {ids[1]: ["conflicting_or_superseded"], ids[0]: ["conflicting_or_superseded"]}},
          [{"name": f"before the {f3} the chain is one hop and {f2} is current", "as_of": plan.day(70),
            "expect": {"sequence": [ids[1], ids[0]], "exclude": [ids[2]],
                       "absent_labels": {ids[1]: ["conflicting_or_superseded"]}}}])


def _plant_person(plan: Plan, rng: random.Random, first: str, last: str) -> None:
    pid = plan.projects[0][0]
    person = _slug(first)
    plan.entities[person] = {"name": f"{first} {last}", "aliases": [first.lower()]}
    (act, doing), (food, eating) = rng.choice(ACTIVITIES), rng.choice(FOODS)
    t_act, t_food = _slug(act), _slug(food)
    plan.topics[t_act] = {"aliases": [act]}
    plan.topics[t_food] = {"aliases": [food, "meals"]}
    role = rng.choice([q for q in ROLE_QUALIFIERS]) + " cook"
    cook = _slug(role)
    plan.entities[cook] = {"name": role.capitalize(), "aliases": [role], "project": pid}
    sleep = rng.choice(SLEEP_HOURS)
    tag = _dash(first)
    state, pref, chat = f"state.{tag}.{_dash(act)}", f"pref.{tag}.{_dash(food)}", f"chat.{tag}.day100"
    cook_state = f"state.{_dash(role)}.sleep"
    P = plan.planted
    P.append(_record(plan, state, "state", f"Lately I have not felt like {doing}.",
                     title=f"{first}'s recent mood about {act}", topics=[t_act], entities=[person],
                     stability="temporary", status="active", observed_at=plan.day(100), valid_from=plan.day(100),
                     last_confirmed_at=plan.day(103), expected_resolution_at=plan.day(108), sources=[chat]))
    P.append(_record(plan, pref, "state", f"I do not like {eating}.", title=f"{first}'s dietary preference",
                     topics=[t_food], entities=[person], stability="stable", status="active",
                     observed_at=plan.day(40), valid_from=plan.day(40)))
    P.append(_record(plan, chat, "source", f"{first}: after three night shifts in a row I just sit with my tea; "
                     f"the {act} set stays in its case.", title="Evening check-in, day 100",
                     at=plan.day(100), topics=[t_act], entities=[person]))
    P.append(_record(plan, cook_state, "state", f"The {role} sleeps {sleep} to stay awake for the night bake.",
                     title=f"Sleep schedule of the {role}", entities=[cook], stability="temporary",
                     status="active", observed_at=plan.day(101), valid_from=plan.day(101),
                     last_confirmed_at=plan.day(150), expected_resolution_at=plan.day(107)))
    _case(plan, "checkpoint", "time",
          f"{first}'s state about {act} has a review checkpoint (day 108) that passed with no later "
          "confirmation: it carries the note and keeps its rank; it is not an expiry.",
          f"Why have I not felt like {doing} lately?",
          {"decision": "retrieve", "lead": state, "labels": {state: ["checkpoint_passed", "structured_context"]}},
          [{"name": "before the checkpoint there is no note", "as_of": plan.day(106),
            "expect": {"lead": state, "absent_labels": {state: ["checkpoint_passed"]}}},
           {"name": "a confirmation after the checkpoint means no note",
            "query": f"When does the {role} sleep?",
            "expect": {"lead": cook_state, "absent_labels": {cook_state: ["checkpoint_passed"]}}},
           {"name": "before it was observed the state does not exist yet", "as_of": plan.day(99),
            "expect": {"exclude": [state], "rejected": {state: "not_yet_observed"}}}])
    _case(plan, "similar-wording", "topic-boundary",
          f"Two memories of {first} with the same negative shape: the one about {act} answers the "
          f"question, the one about {food} does not.",
          f"Why have I not felt like {act} recently?",
          {"decision": "retrieve", "lead": state, "exclude": [pref], "rejected": {pref: "off_topic"}},
          [{"name": f"the boundary holds the other way (a {food} question keeps {food}, drops {act})",
            "query": f"Why do I not like {eating}?",
            "expect": {"lead": pref, "exclude": [state], "rejected": {state: "off_topic"}}}],
          as_of=plan.day(106))


def _plant_scoped(plan: Plan, rng: random.Random) -> None:
    (p1, _), (p2, t2) = plan.projects[0], plan.projects[1]
    role = rng.choice(ROLES)
    q1, q2 = rng.sample(ROLE_QUALIFIERS, 2)
    r1, r2 = f"{q1} {role}", f"{q2} {role}"
    e1, e2 = _slug(r1), _slug(r2)
    plan.entities[e1] = {"name": r1.capitalize(), "aliases": [r1], "project": p1}
    plan.entities[e2] = {"name": r2.capitalize(), "aliases": [r2], "project": p2}
    watch, topic = rng.choice(WATCHES)
    plan.topics[topic] = {"aliases": [watch]}
    hazard = rng.choice(HAZARDS)
    d1, d2, n2 = f"decision.{_dash(r1)}.watch", f"decision.{_dash(r2)}.watch", f"note.{_dash(r2)}.harbour"
    P = plan.planted
    P.append(_record(plan, d1, "decision",
                     f"The {r1} decided the {watch} rotates every four hours so nobody sleeps through the "
                     "dawn count.", title=f"{watch.capitalize()} rotation", topics=[topic], entities=[e1],
                     status="active", decided_at=plan.day(70),
                     rationale="Long watches left people too tired to notice a faint signal."))
    P.append(_record(plan, d2, "decision",
                     f"The {r2} decided the {watch} doubles while {hazard} is reported.", p2,
                     title=f"{watch.capitalize()} in {t2}", topics=[topic], entities=[e2], status="active",
                     decided_at=plan.day(72), rationale=f"{hazard.capitalize()} is hard to see after dark."))
    P.append(_record(plan, n2, "note", f"The {r2} kept everyone in harbour for two days until the {hazard} "
                     "report cleared.", p2, at=plan.day(73), entities=[e2]))
    _case(plan, "scoped-entity", "entity-scope",
          f'"{r1}" resolves to its entity and keeps the query in its project; the {r2} belongs to '
          f"another project, though both roles end in \"{role}\".",
          f"What did the {r1} decide about the {watch}?",
          {"decision": "retrieve", "lead": d1, "exclude": [d2], "rejected": {d2: "out_of_scope"},
           "labels": {d1: ["structured_context"]}},
          [{"name": f"the {r2} is scoped to the other project", "query": f"What did the {r2} decide about the {watch}?",
            "expect": {"lead": d2, "exclude": [d1], "rejected": {d1: "out_of_scope"}}},
           {"name": f"the bare word {role} resolves to no entity, so no project is scoped out",
            "query": f"What did the {role} decide about the {watch}?", "expect": {"include": [d1, d2]}}])
    _case(plan, "ambiguous-entity", "triage",
          f'"the {role}" ends two scoped aliases ({r1}, {r2}); nothing else anchors the question, so the '
          "garden asks which one is meant.",
          f"What did the {role} decide?",
          {"decision": "ask", "max_items": 0},
          [{"name": f"a named {role} is not ambiguous", "query": f"What did the {r2} decide?",
            "expect": {"decision": "retrieve", "lead": d2}}])


def _plant_phrases(plan: Plan, rng: random.Random, count: int, friend: str) -> None:
    topic, life = "camp_jokes", "camp_life"
    plan.topics[topic] = {"aliases": ["joke", "jokes"], "related": [life]}
    plan.topics[life] = {}
    P = plan.planted
    # the common span, in three weekly logs: too frequent to earn phrase credit
    common = []
    for k, line in enumerate(["搭好了观测小屋，{s} 第一次点火，大家围着它唱歌。", "雪堡茶会，{s} 放在门口取暖。",
                              "暴风雪三天，所有人挤在主屋，靠 {s} 烤面包。"]):
        rid = f"log.week{k + 2:02d}"
        common.append(rid)
        P.append(_record(plan, rid, "source", f"第{k + 2}周营地日志：" + line.format(s=COMMON_SPAN),
                         title=f"营地日志 第{k + 2}周", at=plan.day(10 + 7 * k), topics=[life]))
    a_words, b_words, c_words = (rng.sample(PHRASE_A, count), rng.sample(PHRASE_B, count),
                                 rng.sample(PHRASE_C, count))
    for i in range(count):
        a, b, c = a_words[i], b_words[i], c_words[i]
        phrase, week, place = f"{a} {b} {c}", 12 + i, PHRASE_PLACES[i % len(PHRASE_PLACES)]
        log, view = f"log.week{week}", f"view.jokes.{_dash(a)}"
        chatty, sticker = f"chat.campfire.{_dash(a)}", f"note.sticker.{_dash(a)}"
        P.append(_record(plan, log, "source",
                         f"第{week}周营地日志：大家又笑起 {phrase}，the {b} 在{place}上冻成了石头，勺子都弯了。",
                         title=f"营地日志 第{week}周", at=plan.day(110 + i), topics=[topic]))
        P.append(_record(plan, view, "view", f"营地笑话索引：{phrase} 见第{week}周日志；雪堡茶会见第三周日志。",
                         title="营地笑话索引", at=plan.day(130 + i), topics=[topic], sources=[log]))
        P.append(_record(plan, chatty, "source",
                         "篝火旁的长聊天：还记得我们那次在冰川边上搭雪堡吗？还记得我们那次把茶煮糊了吗？还记得我们那次半夜看极光，"
                         "大家都裹着睡袋说个不停？"
                         f"哈哈，还记得我们那次 {c} 吗，其实也没什么，就是 {friend} 把手套落在 {a} "
                         "上面了。还记得我们那次唱歌唱到天亮吗？还记得我们那次吗？我们那次真的很开心，还记得吗，还记得吗。",
                         title="篝火闲聊", at=plan.day(115 + i), topics=[life]))
        P.append(_record(plan, sticker, "note", f"冰箱上的贴纸写着 {a}-{b}-{c}，是营地纪念品。",
                         at=plan.day(125 + i), topics=[topic]))
        controls = [
            {"name": "reversed word order earns no phrase credit", "query": f"还记得我们那次 {c} {b} {a} 吗？",
             "expect": {"absent_labels": {log: ["phrase_match"], view: ["phrase_match"]}}},
            {"name": "hyphen-joined words earn no phrase credit", "query": f"还记得我们那次 {a}-{b}-{c} 吗？",
             "expect": {"absent_labels": {log: ["phrase_match"], sticker: ["phrase_match"]}}},
            {"name": "a single word is already a token, no phrase credit", "query": f"还记得我们那次 {b} 吗？",
             "expect": {"absent_labels": {log: ["phrase_match"]}}},
            {"name": "a span opening with a function word earns no phrase credit", "query": f"还记得 the {b} 吗？",
             "expect": {"absent_labels": {log: ["phrase_match"]}}},
        ]
        if i == 0:
            controls.append({"name": "a span in many records is a common term, no phrase credit",
                             "query": f"还记得我们那次 {COMMON_SPAN} 吗？",
                             "expect": {"absent_labels": {rid: ["phrase_match"] for rid in common}}})
        _case(plan, f"named-phrase-{i + 1}", "phrase",
              f'A named phrase, "{phrase}", in a camp log written mostly in Chinese, against a chatty look-alike '
              "that shares the query's filler and holds the words apart; only word order and adjacency single "
              "out the log.",
              f"还记得我们那次 {phrase} 吗？",
              {"decision": "retrieve", "lead": log, "labels": {log: ["phrase_match"], view: ["derived_view"]},
               "before": [[log, view]], "absent_labels": {sticker: ["phrase_match"], chatty: ["phrase_match"]}},
              controls)


def _plant_doors(plan: Plan, rng: random.Random) -> None:
    pid = plan.projects[2][0]
    signal, landing = rng.choice(SIGNALS), rng.choice(LANDINGS)
    topic = "crossing"
    plan.topics[topic] = {"aliases": ["crossing", "crossings"]}
    times = rng.choice(["four", "five", "six"])
    log, private, late = (f"log.{_dash(signal)}.day80", f"note.{_dash(signal)}.private",
                          f"log.{_dash(signal)}.day{LATE_DAY}")
    P = plan.planted
    P.append(_record(plan, log, "source", f"The {signal} sounded {times} times at the {landing} before the "
                     "morning crossing.", pid, at=plan.day(80), topics=[topic]))
    P.append(_record(plan, private, "note", f"The {signal} sounded {times} times at the {landing}; my own "
                     "worry about the pilot.", pid, at=plan.day(81), topics=[topic], private=True))
    P.append(_record(plan, late, "source", f"The {signal} sounded {times} times at the {landing} after the "
                     "long storm.", pid, at=plan.day(LATE_DAY), topics=[topic]))
    tally, control, secret, timetable = ("log.tally.day84", "control.tally.day83", "note.tally.private",
                                         "decision.crossing.timetable")
    hour = rng.choice(["nine", "ten", "eight"])
    P.append(_record(plan, control, "control", None, pid, title="Passenger tally import report", at=plan.day(83)))
    P.append(_record(plan, tally, "source", f"Riders counted after {hour} in the evening, the first week, "
                     "never more than three.", pid, at=plan.day(84), topics=[topic]))
    P.append(_record(plan, secret, "note", f"The pilot asked privately to finish before {hour} on weeknights.",
                     pid, at=plan.day(84), topics=[topic], private=True))
    P.append(_record(plan, timetable, "decision", f"The last crossing leaves at {hour} in the evening from "
                     "now on.", pid, topics=[topic], status="active", decided_at=plan.day(86),
                     sources=[tally, control, secret],
                     rationale=f"The tally shows few riders after {hour}."))
    _case(plan, "door-retriever", "eligibility-gate",
          "A private note and a log written after as_of match the query as well as the answer does, and "
          "stay out, each with its reason.",
          f"How many times did the {signal} sound at the {landing}?",
          {"decision": "retrieve", "lead": log, "rejected": {private: "private", late: "not_yet_observed"},
           "exclude": [private, late]},
          [{"name": "the private note when the query allows it", "include_private": True,
            "expect": {"include": [private], "exclude": [late]}},
           {"name": "the later log once it exists", "as_of": plan.day(LATE_DAY + 5), "expect": {"include": [late]}}])
    _case(plan, "door-provenance", "eligibility-gate",
          "The sources a packed decision names follow it through the gate: the tally rides as provenance, "
          "the control record and the private note it also names stay out.",
          "When does the last crossing leave in the evening?",
          {"decision": "retrieve", "lead": timetable, "labels": {tally: ["provenance_supported"]},
           "rejected": {control: "control_plane", secret: "private"}, "exclude": [control, secret]},
          [{"name": "the private source rides once the query allows it", "include_private": True,
            "expect": {"labels": {secret: ["provenance_supported"]}, "rejected": {control: "control_plane"}}}])


# --- filler: streamed, one record at a time ------------------------------------------------


def filler(plan: Plan, count: int) -> Iterator[dict]:
    """`count` filler records, made one at a time; only the last few ids of each project are
    remembered, for a note or view to cite (never dated before what it cites)."""
    rng = random.Random(f"{plan.name}/{plan.seed}/filler")
    recent = {pid: deque(maxlen=RECENT) for pid, _ in plan.projects}   # (id, day) a later record may cite
    last_source: tuple[str, str, str, str, int] | None = None   # (id, text, project, topic, day) for a chunk
    made = 0
    n = 0
    while made < count:
        n += 1
        roll = rng.random()
        pid = rng.choice(plan.projects)[0]
        tid, aliases, nouns = rng.choice(FILLER_TOPICS)
        day = rng.randrange(SPAN_DAYS + 1)
        people = plan.people[pid]
        who = plan.entities[rng.choice(people)]["name"]
        left = count - made
        if roll < 0.30 or (left < 3 and roll < 0.5):
            text = _filler_text(rng, who, nouns)
            rid = f"src.{n:07d}"
            yield _record(plan, rid, "source", text, pid, title=f"{aliases[0].capitalize()} log, day {day}",
                          at=plan.day(day), topics=[tid])
            recent[pid].append((rid, day))
            last_source = (rid, text, pid, tid, day)
            made += 1
        elif roll < 0.42 and last_source is not None:
            sid, text, spid, stid, sday = last_source
            words = text.split()
            cut = max(3, len(words) // 2)
            yield _record(plan, f"chunk.{n:07d}", "chunk", " ".join(words[:cut]), spid, at=plan.day(sday),
                          topics=[stid], sources=[sid])
            made += 1
        elif roll < 0.54:
            text = "；".join(rng.sample(CJK_CLAUSES, 2)) + "。"
            if rng.random() < 0.5:
                text += f" {who} {rng.choice(FILLER_VERBS)} the {rng.choice(nouns)}."
            rid = f"cjk.{n:07d}"
            yield _record(plan, rid, "source", text, pid, title="营地记录", at=plan.day(day), topics=[tid])
            recent[pid].append((rid, day))
            made += 1
        elif roll < 0.64 and recent[pid]:
            cited, day = _cite(rng, recent[pid], 2)
            rid = f"note.{n:07d}"
            yield _record(plan, rid, "note", f"Summary: {_filler_text(rng, who, nouns)}", pid, at=plan.day(day),
                          fidelity="summary", topics=[tid], sources=cited)
            recent[pid].append((rid, day))
            made += 1
        elif roll < 0.70 and recent[pid]:
            cited, day = _cite(rng, recent[pid], 3)
            yield _record(plan, f"view.{n:07d}", "view",
                          f"Index of {aliases[0]}: " + "; ".join(f"see {c}" for c in cited) + ".", pid,
                          at=plan.day(day), topics=[tid], sources=cited)
            made += 1
        elif roll < 0.80:
            observed = rng.randrange(SPAN_DAYS - 20)
            confirmed = observed + rng.randrange(1, 15) if rng.random() < 0.6 else None
            yield _record(plan, f"state.{n:07d}", "state",
                          f"The {rng.choice(nouns)} is kept in {rng.choice(FILLER_PLACES)} for now.", pid,
                          topics=[tid], stability=rng.choice(["temporary", "stable"]), status="active",
                          observed_at=plan.day(observed), valid_from=plan.day(observed),
                          last_confirmed_at=plan.day(confirmed) if confirmed is not None else None,
                          expected_resolution_at=plan.day(observed + rng.randrange(5, 30)))
            made += 1
        elif roll < 0.90 and left >= 2:
            length = min(left, rng.choice([2, 2, 3]))
            noun = rng.choice(nouns)
            places = rng.sample(FILLER_PLACES, length)
            ids = [f"decision.{n:07d}.{k}" for k in range(length)]
            first = rng.randrange(SPAN_DAYS - 40)
            for k, rid in enumerate(ids):
                last = k == length - 1
                yield _record(plan, rid, "decision", f"The {noun} goes to {places[k]}.", pid, topics=[tid],
                              status="active" if last else "superseded",
                              superseded_by=None if last else ids[k + 1], decided_at=plan.day(first + 15 * k),
                              rationale=f"{places[k].capitalize()} had room {rng.choice(FILLER_TIMES)}.")
            made += length
        elif roll < 0.95:
            yield _record(plan, f"private.{n:07d}", "note", f"Private: {_filler_text(rng, who, nouns)}", pid,
                          at=plan.day(day), topics=[tid], private=True)
            made += 1
        else:
            yield _record(plan, f"control.{n:07d}", "control", None, pid,
                          title=f"Import report, day {day}: {rng.randrange(5, 90)} {aliases[0]} entries re-indexed",
                          at=plan.day(day))
            made += 1


def _cite(rng: random.Random, recent: deque, most: int) -> tuple[list[str], int]:
    """Up to `most` recent ids of one project, and a day on or after the latest of them."""
    picked = rng.sample(list(recent), min(most, len(recent)))
    return sorted(rid for rid, _ in picked), min(SPAN_DAYS, max(d for _, d in picked) + rng.randrange(5))


def _filler_text(rng: random.Random, who: str, nouns: list[str]) -> str:
    noun, other = rng.sample(nouns, 2)
    form = rng.randrange(4)
    if form == 0:
        return f"{who} {rng.choice(FILLER_VERBS)} the {noun} in {rng.choice(FILLER_PLACES)} {rng.choice(FILLER_TIMES)}."
    if form == 1:
        return f"{who}: the {noun} and the {other} need another look {rng.choice(FILLER_TIMES)}."
    if form == 2:
        return (f"{who} {rng.choice(FILLER_VERBS)} the {noun}, then the {other}; "
                f"{rng.choice(CJK_CLAUSES)}。")
    return f"{rng.choice(FILLER_TIMES).capitalize()} {who} found the {noun} beside the {other}."


# --- writing ------------------------------------------------------------------------------


@dataclass
class Generated:
    story: Path
    cases: Path
    records: int
    case_ids: list[str]

    def lines(self) -> list[str]:
        # `garden contrast` reads regression/ and challenge/ unless named a folder: say which
        return [f"wrote {self.story} ({self.records} records)",
                f"wrote {self.cases} ({len(self.case_ids)} cases: {', '.join(self.case_ids)})",
                f"next: garden contrast {self.cases}"]


WHOLE_DIGITS = 12            # a typed number longer than this is not read (its digits are unbounded)
MAX_SEED = 10 ** WHOLE_DIGITS - 1


def _whole(value) -> int | None:
    """An int, or a string of ASCII digits as typed on the command line; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= WHOLE_DIGITS:
        return int(value)
    return None


def check_request(name, records, seed) -> tuple[int, int]:
    """(records, seed) as numbers, or GardenError with one line per bad value."""
    problems = []
    if not isinstance(name, str) or not STORY_NAME.fullmatch(name):
        problems.append(f"NAME {shown(name)}: not a story name (lower-case letters, digits, '-', '_' and '.', "
                        "not starting with '.')")
    count, number = _whole(records), _whole(seed)
    if count is None or not MIN_RECORDS <= count <= MAX_RECORDS:
        problems.append(f"`records` {shown(records)}: a whole number from {MIN_RECORDS} (the planted scenarios "
                        f"and the filler around them) to {MAX_RECORDS:,}")
    if number is None or not 0 <= number <= MAX_SEED:
        problems.append(f"`seed` {shown(seed)}: a whole number from 0 to {MAX_SEED:,}")
    if problems:
        raise GardenError(problems)
    return count, number


def header(plan: Plan) -> dict:
    topics = {t: plan.topics[t] for t in sorted(plan.topics)}
    entities = {e: plan.entities[e] for e in sorted(plan.entities)}
    titles = ", ".join(title for _, title in plan.projects)
    return {"story": plan.name, "title": f"Generated story {plan.name}",
            "about": (f"A fictional store generated by `garden generate {plan.name} --records {plan.records} "
                      f"--seed {plan.seed}`: {titles}. Filler records of every kind surround planted "
                      "scenarios (a changed choice, a supersession chain, a passed checkpoint, scoped roles "
                      "sharing a word, named phrases with look-alikes, private and control records), each "
                      "with its generated case."),
            "reviewed_at": plan.as_of, "project": plan.projects[0][0], "topics": topics, "entities": entities}


def _records(plan: Plan) -> Iterator[dict]:
    yield from plan.planted
    yield from filler(plan, plan.records - len(plan.planted))


def _json_line(value: dict) -> str:
    # dates are the only non-JSON values a plan holds; ISO text is what the loader reads back
    return json.dumps(value, ensure_ascii=False, sort_keys=False, default=dt.date.isoformat) + "\n"


def write_story(plan: Plan, fh, form: str = "yaml") -> int:
    """Stream the story into `fh`, record by record. YAML: the header, then each record as
    an independent list item. JSON Lines: the header on line 1, then one record per line."""
    records = counted(_records(plan), Progress(f"generate: {plan.name}", total=plan.records, unit="records"))
    if form == "jsonl":
        fh.write(_json_line(header(plan)))
        written = 0
        for written, rec in enumerate(records, 1):
            fh.write(_json_line(rec))
        return written
    fh.write(dump_yaml(header(plan)))
    fh.write("records:\n")
    written = 0
    for written, rec in enumerate(records, 1):
        fh.write(dump_yaml([rec]))
    return written


def story_file(name: str, records: int, out: str | Path | None) -> tuple[Path, list[str]]:
    """Where the story goes and in which form (by its suffix), with the problems of `out`.
    Default: fixtures/NAME.yaml up to MAX_YAML_RECORDS, fixtures/NAME.jsonl past it."""
    if out is None:
        suffix = ".yaml" if records <= MAX_YAML_RECORDS else JSONL
        return Path(STORY_FOLDER) / f"{name}{suffix}", []
    path = Path(out)
    if path.suffix not in (".yaml", ".yml", JSONL) or path.stem != name:
        return path, [f"`out` {str(path)!r}: must be a file named after the story ({name}.yaml or {name}{JSONL})"]
    if path.suffix != JSONL and records > MAX_YAML_RECORDS:
        return path, [f"`out` {str(path)!r}: {records:,} records are too many for a YAML story (the reader's "
                      f"4 MiB bound holds about {MAX_YAML_RECORDS:,}); write {name}{JSONL}"]
    return path, []


def generate(name: str, records: int, seed: int = 0, out: str | Path | None = None,
             force: bool = False) -> Generated:
    """Write the story to `out` (default fixtures/NAME.yaml, or NAME.jsonl past
    MAX_YAML_RECORDS) and its cases to cases/NAME/ beside the fixtures folder. Refuses to
    replace either unless `force`; with `force`, the story's other form is removed too, since
    a name finds NAME.yaml before NAME.jsonl and the old one would shadow the new."""
    records, seed = check_request(name, records, seed)
    story_path, problems = story_file(name, records, out)
    root = story_path.parent.parent if story_path.parent.name == STORY_FOLDER else story_path.parent
    cases_dir = root / CASES_FOLDER / name
    other_forms = [story_path.with_suffix(s) for s in (".yaml", ".yml", JSONL) if s != story_path.suffix]
    if not force:
        for path in (story_path, *other_forms, cases_dir):
            if path.exists() or path.is_symlink():
                problems.append(f"{path}: already exists; pass `force` to replace it")
    if story_path.is_dir():
        problems.append(f"{story_path}: is a folder")
    if problems:
        raise GardenError(problems)
    plan = plan_story(name, records, seed)
    try:
        story_path.parent.mkdir(parents=True, exist_ok=True)
        cases_dir.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise GardenError(f"{exc.filename or story_path}: cannot make the folder: {exc.strerror or exc}; "
                          "nothing replaced") from None
    # everything is written aside first; only then is anything replaced, cases and story
    # together, and a failure on the way puts back what was there: all or nothing
    tmp, staging = None, None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{name}-{os.getpid()}-", suffix=".tmp", dir=story_path.parent)
        os.chmod(tmp, 0o666 & ~_umask())   # a story is durable source: the mode any new file gets
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            written = write_story(plan, fh, "jsonl" if story_path.suffix == JSONL else "yaml")
        staging = _stage_cases(plan, story_path, cases_dir)
        _swap(Path(tmp), story_path, staging, cases_dir)
        tmp = staging = None
        for path in other_forms:
            if path.is_file() or path.is_symlink():
                path.unlink()
    except OSError as exc:
        raise GardenError(f"{exc.filename or story_path}: cannot write: {exc.strerror or exc}; "
                          "nothing replaced") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    return Generated(story_path, cases_dir, written, [c["id"] for c in plan.cases])


def _swap(story_tmp: Path, story_path: Path, staging: Path, cases_dir: Path) -> None:
    """Put the new cases and story in place, or, if either move fails, leave the old ones."""
    aside = None
    if cases_dir.is_symlink() or cases_dir.exists():
        aside = cases_dir.with_name(f".{cases_dir.name}-{os.getpid()}-old")
        os.replace(cases_dir, aside)
    try:
        os.replace(staging, cases_dir)
        try:
            os.replace(story_tmp, story_path)
        except BaseException:
            shutil.rmtree(cases_dir, ignore_errors=True)
            raise
    except BaseException:
        if aside is not None:
            os.replace(aside, cases_dir)
        raise
    if aside is not None:
        if aside.is_dir() and not aside.is_symlink():
            shutil.rmtree(aside, ignore_errors=True)
        else:
            aside.unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _stage_cases(plan: Plan, story_path: Path, cases_dir: Path) -> Path:
    """The cases written to a new folder beside `cases_dir`, not yet in place."""
    staging = Path(tempfile.mkdtemp(prefix=f".{plan.name}-{os.getpid()}-", dir=cases_dir.parent))
    try:
        os.chmod(staging, 0o777 & ~_umask())
        ref = os.path.relpath(story_path.resolve(), cases_dir.resolve())
        for case in plan.cases:
            (staging / f"{case['id']}.yaml").write_text(dump_yaml({**case, "story": ref}), encoding="utf-8")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging
