"""How the offline mock model judges (a judge request of `blockyard eval`: docs/evals.md, "Judges").

A rule anyone can predict, so that an eval with a judge passes or fails offline for a reason one can
read: the rubric's terms in double quotes are what a good answer mentions. The score is the share of
them the answer contains (ignoring case); a rubric that quotes nothing scores any non-empty answer 1
and an empty one 0. The reasoning says which terms were found and which were not.
"""

from __future__ import annotations

import json
import re

from engine.core.values import JsonDict

_QUOTED = re.compile(r'"([^"\n]+)"')


def judge_verdict(inputs: JsonDict) -> JsonDict:
    """The mock's {reasoning, score} for a judge request's inputs (`rubric`, `output`)."""
    rubric = str(inputs.get("rubric") or "")
    output = inputs.get("output")
    text = (
        output if isinstance(output, str) else json.dumps(output, ensure_ascii=False, default=str)
    )
    terms = list(dict.fromkeys(_QUOTED.findall(rubric)))
    if not terms:
        score = 1.0 if text.strip() and output not in (None, {}, []) else 0.0
        said = "the answer is not empty" if score else "the answer is empty"
        return {"reasoning": f"mock judge: the rubric quotes no terms, and {said}.", "score": score}
    found = [term for term in terms if term.lower() in text.lower()]
    missing = [term for term in terms if term not in found]
    reasoning = (
        f"mock judge: the answer contains {len(found)} of the {len(terms)} terms the rubric quotes"
    )
    if found:
        reasoning += " (" + ", ".join(f'"{term}"' for term in found) + ")"
    if missing:
        reasoning += "; it lacks " + ", ".join(f'"{term}"' for term in missing)
    return {"reasoning": reasoning + ".", "score": round(len(found) / len(terms), 4)}
