"""Writes the two fictional stores of the `store-scale` contrast case: one of short chat lines,
one of chat turns each followed by a note drawn from it, so that a support means something
else in each.

- `tern-quay`: two friends, Maelle and Oskar, chatting over twelve evenings about a harbour
  town (boats, the bakery, the choir, an allotment, a dog): 144 short lines, each a turn of a
  sitting (a date and a title), one of which says when Oskar repainted his dinghy.
- `linden-row`: two neighbours chatting over twelve sittings of eight turns, each turn
  followed, after its sitting, by a note that restates it in the third person (the register
  questions are asked in), written from pools of statements and slot values.

Seeded, so the same bytes every run. Nothing here is read by the garden: the stories are data
(fixtures/), and this script is how they were made.

    .venv/bin/python experiments/gate_contrast_stories.py [--out fixtures]
"""
from __future__ import annotations

import argparse
import datetime as dt
import random
import sys
from pathlib import Path

import yaml

PROJECT = Path(__file__).resolve().parents[1]
SEED = 7

CHAT_LINES = [
    "the bakery on the quay sold out of rye loaves before nine",
    "the choir practice moved to the chapel hall because of the leak",
    "my allotment beans finally climbed past the fence posts",
    "took the dog along the shingle path and she chased every gull",
    "the ferry timetable changed again and nobody told the harbour office",
    "fixed the squeaky brake on my bicycle with a borrowed spanner",
    "the fish stall had mackerel for once and I grilled two for supper",
    "my sister called about the wedding seating plan for an hour",
    "the tide came right up to the slipway steps this morning",
    "bought a second-hand kettle at the church jumble sale",
    "the lighthouse tour is closed until the railings are painted",
    "we should book the long table at the crab shack for Friday",
    "the knitting circle finished the blanket for the lifeboat raffle",
    "my back aches from hauling compost bins up the lane",
    "the harbour master fined the yacht that blocked the crane",
    "I started reading that thick novel about the salt merchants",
    "the storm knocked slates off the net loft roof again",
    "the market has strawberries early because of the warm spring",
    "my landlord finally sent someone about the damp bedroom wall",
    "the quiz night team lost on the geography round by one point",
    "the dog ate half a sandwich someone left on the sea wall",
    "the new café on the corner does a decent flat white",
    "I signed up for the rowing club's beginner evenings",
    "the bus to town skipped our stop twice this week",
    "grandad's old radio still picks up the shipping forecast",
    "the council wants to move the bins to the car park",
    "my tomatoes split after all that rain on the allotment",
    "the bell ringers practised until ten and the whole street heard",
    "found a crab pot washed up by the rocks below the cliff path",
    "the chip shop raised the price of a large portion again",
]
COMMENTS = ["honestly", "can you believe it", "typical", "not bad at all", "so that was my day", "again",
            "which was a relief", "of all things", "as usual", "at last"]
PLANTED = ("oskar", "finally repainted the dinghy on Saturday morning, it is teal now instead of that tired green")

NEIGHBOURS = ("ines", "bram")
# what a neighbour says (first person) and the note drawn from it (third person), the register questions use
STATEMENTS = [
    ("I started {hobby} lessons at the community hall on {day}s", "{a} started {hobby} lessons at the community hall"),
    ("my {relative} is visiting from {place} next week", "{a}'s {relative} visited from {place}"),
    ("we adopted a {pet} from the shelter and called it {petname}", "{a} adopted a {pet} named {petname}"),
    ("I finished the {craft} for the {outing} raffle", "{a} made a {craft} for the {outing} raffle"),
    ("I took a job at the {shop} on the corner", "{a} works at the {shop}"),
    ("I sprained my ankle at the {outing}", "{a} sprained an ankle at the {outing}"),
    ("I am saving up for a {purchase}", "{a} is saving for a {purchase}"),
    ("I grew {crop} on the allotment this year", "{a} grew {crop} on the allotment"),
    ("I booked a trip to {place} in {month}", "{a} booked a trip to {place} in {month}"),
    ("I read {book} and loved it", "{a} read {book}"),
]
NOTE_SLOTS = {
    "hobby": ["pottery", "fencing", "watercolour", "salsa", "archery", "climbing", "bookbinding", "rowing"],
    "month": ["March", "April", "May", "June", "July", "August", "September", "October"],
    "day": ["Monday", "Tuesday", "Wednesday", "Thursday", "Saturday"],
    "shop": ["bakery", "bookshop", "pharmacy", "hardware shop", "florist"],
    "relative": ["sister", "brother", "aunt", "grandmother", "cousin"],
    "place": ["Lisbon", "Tromsø", "Galway", "Ghent", "Bergen", "Porto"],
    "outing": ["street fair", "lantern parade", "quiz night", "harvest supper", "flower show"],
    "pet": ["greyhound", "tabby cat", "rabbit", "terrier", "tortoise"],
    "petname": ["Pickle", "Biscuit", "Moss", "Juniper", "Toffee", "Bramble"],
    "craft": ["quilt", "wooden stool", "knitted scarf", "clay bowl", "birdhouse"],
    "purchase": ["camper van", "piano", "road bike", "kayak", "telescope"],
    "book": ["a history of lighthouses", "a novel about glassblowers", "a guide to mushrooms",
             "a memoir of a ferry captain"],
    "crop": ["runner beans", "pumpkins", "rhubarb", "courgettes", "sweet peas"],
}


def chat_story(rng: random.Random) -> dict:
    people = ("maelle", "oskar")
    start = dt.date(2031, 3, 2)
    records, planted_at = [], (7, 5)
    for s in range(12):
        day = start + dt.timedelta(days=9 * s)
        for t in range(12):
            who = people[(s + t) % 2]
            if (s, t) == planted_at:
                who, line = PLANTED
            else:
                line = f"{rng.choice(CHAT_LINES)}, {rng.choice(COMMENTS)}"
            records.append(turn(f"chat.s{s + 1:02d}.t{t + 1:02d}", day, f"Evening chat {s + 1}", who, line))
    return story("tern-quay", "Tern Quay chats", "Two friends chatting over twelve evenings in a harbour town: a "
                 "store of short chat lines, nothing written in a question's own register", people, records)


def turn(rid: str, day: dt.date, title: str, who: str, line: str) -> dict:
    """One chat line of a sitting, said by `who`."""
    return {"id": rid, "kind": "source", "at": day.isoformat(), "title": title, "speaker": who,
            "text": f"{who.capitalize()}: {line[0].upper()}{line[1:]}."}


def story(name: str, title: str, about: str, people, records: list[dict]) -> dict:
    """A story of `records` whose speakers are `people`, each an entity named as it is written."""
    return {"story": name, "title": title, "about": f"{about} (experiments/gate_contrast_stories.py).",
            "project": name, "entities": {p: {"name": p.capitalize(), "aliases": [p.capitalize()]} for p in people},
            "records": records}


def noted_chat_story(rng: random.Random) -> dict:
    start = dt.date(2031, 2, 1)
    records = []
    for s in range(12):
        day = start + dt.timedelta(days=10 * s)
        turns = []
        for t in range(8):
            who = NEIGHBOURS[(s + t) % 2]
            said, noted = rng.choice(STATEMENTS)
            values = {k: rng.choice(v) for k, v in NOTE_SLOTS.items()}
            rid = f"chat.s{s + 1:02d}.t{t + 1:02d}"
            records.append(turn(rid, day, f"Sitting {s + 1}", who, said.format(**values)))
            turns.append((rid, noted.format(a=who.capitalize(), **values)))
        for n, (rid, noted) in enumerate(turns, 1):   # the notes drawn from the sitting, after it
            records.append({"id": f"note.s{s + 1:02d}.{n}", "kind": "note", "fidelity": "summary",
                            "at": day.isoformat(), "sources": [rid], "text": f"{noted}."})
    return story("linden-row", "Linden Row chats and notes", "Two neighbours chatting over twelve sittings, each "
                 "turn with the note drawn from it in the third person, the register questions are asked in",
                 NEIGHBOURS, records)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(PROJECT / "fixtures"))
    args = ap.parse_args(argv)
    rng = random.Random(SEED)
    for made in (chat_story(rng), noted_chat_story(rng)):
        path = Path(args.out) / f"{made['story']}.yaml"
        path.write_text(yaml.safe_dump(made, sort_keys=False, allow_unicode=True, width=100), encoding="utf-8")
        print(f"wrote {path}: {len(made['records'])} records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
