"""The budget allocation's report words: the lead sentences that say what several of a BudgetPlan's
fields mean together (its geography, split and targets), said before the plan's other settings."""
from __future__ import annotations

import dataclasses
import math
from typing import Any

from core.census.geography_data import stylised_level_names
from core.census.targets import parse_target
from core.report_words import join_words, number_text, number_words, plural, value_words


def budget_lead(plan: Any) -> tuple[list[str], frozenset[str]]:
    meta = {f.name: f.metadata for f in dataclasses.fields(plan)}
    if plan.geography == "stylised":
        names = stylised_level_names(len(plan.fanouts) + 1)
        leaves = math.prod(plan.fanouts)
        per = [f"{n:,} {plural(child)} per {parent}" for n, parent, child in zip(plan.fanouts, names[:-1], names[1:])]
        geo = (f"the {number_words(len(names))} levels ({join_words(list(names))}) of a stylised geography of "
               f"{leaves:,} {plural(names[-1])} ({', '.join(per)})")
    else:
        names = ()
        geo = "the levels of the Georgia census geography" + (" with an uploaded district plan"
                                                            if plan.data.is_upload else "")
    if plan.split == "preset":
        how = f"split by the paper's '{plan.preset}' rule" if plan.preset != "equal" else "split equally"
    elif plan.split == "custom":
        how = f"split by hand (shares {join_words([number_text(s) for s in plan.custom_shares])})"
    else:
        how = "split to minimise the error of the targets below"
    mech = value_words(plan.mechanism, meta["mechanism"], "mechanism")
    unit = "rho (zero-concentrated DP)" if plan.unit == "rho" else "epsilon"
    sentences = [f"A total privacy budget of {number_text(plan.total)} ({unit}) is {how} among {geo}.",
                 f"Each level's counts get noise from the {mech} mechanism, with sensitivity "
                 f"{number_text(plan.sensitivity)}" + (f" and delta {number_text(plan.delta)}" if plan.delta is not None
                                                   else "") + "."]
    words = []
    for spec in plan.targets:
        t = parse_target(spec)
        if t.kind == "leaf":
            words.append(f"one {names[-1] if names else 'block'}")
        elif t.kind == "unit":
            level = names[t.arg] if names and t.arg < len(names) else f"level {t.arg}"
            words.append(f"each whole {level}")
        elif t.kind == "greedy":
            words.append(f"{number_words(t.arg)} districts that follow the geography")
        elif t.kind == "scattered":
            words.append(f"{number_words(t.arg)} districts scattered across it")
        else:
            words.append("the districts of the uploaded plan")
    weights = (f", weighted {join_words([number_text(w) for w in plan.target_weights])}" if plan.target_weights else "")
    sentences.append(f"Accuracy is judged on the population of {join_words(words)}{weights}.")
    a, b = plan.fig2_fanouts
    sentences.append(f"The paper's Figure 2 is redrawn on a small tree of {a:,} x {b:,} units.")
    return sentences, frozenset({"data", "fanouts", "total", "unit", "delta", "split", "preset", "custom_shares",
                                 "mechanism", "sensitivity", "targets", "target_weights", "fig2_fanouts"})


__all__ = ["budget_lead"]
