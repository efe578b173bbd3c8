"""A stream of announcements for tests that compare two ways of judging it: new texts, exact
copies and edited copies of earlier ones (across batch boundaries), and a few bad messages."""

from __future__ import annotations

import json
import random

WORDS = ("cerchiamo sviluppatore java esperienza spring progetto bancario milano contratto "
         "tempo indeterminato sistemista linux server reti sicurezza ansible docker azienda "
         "torino magazziniere carrello elevatore turni notturni cuoco ristorante").split()


def ad_lines(n: int, seed: int) -> list[str]:
    """``n`` JSON lines; every 97th is not JSON, every 89th has an empty text."""
    rng = random.Random(seed)
    texts: list[str] = []
    lines = []
    for i in range(n):
        roll = rng.random()
        if texts and roll < 0.25:
            text = rng.choice(texts)
        elif texts and roll < 0.5:
            words = rng.choice(texts).split()
            words[rng.randrange(len(words))] = rng.choice(WORDS)
            text = " ".join(words)
        else:
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60)))
        texts.append(text)
        if i % 97 == 13:
            lines.append('{"id": "broken", "title": ')
        elif i % 89 == 7:
            lines.append(json.dumps({"id": f"a{i}", "title": " ", "description": ""}))
        else:
            lines.append(json.dumps({"id": f"a{i}", "title": f"annuncio {i % 7}",
                                     "description": text}))
    return lines
