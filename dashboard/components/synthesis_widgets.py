"""Widget values of the Stratified synthesis page for a saved plan (used by "Open a saved report")."""
from __future__ import annotations

from core.synthesis import SYNTHESIZERS, MeansPlan, SweepPlan, SynthesisPlan
from core.synthesis.plan import bounds_text


def plan_to_widgets(plan: SynthesisPlan) -> dict:
    """Widget values (and requested tabs) that rebuild ``plan`` on this page."""
    slug = plan.data.source
    sweep = plan.sweep or SweepPlan()
    means = plan.means or MeansPlan()
    values = {
        "ss_dataset": slug, f"ss_columns_{slug}": list(plan.columns), f"ss_strata_{slug}": list(plan.strata),
        f"ss_target_{slug}": plan.target or "(none)", "ss_synth": plan.synthesizer,
        "ss_epsilons": ", ".join(f"{e:g}" for e in sweep.epsilons), "ss_seeds": len(sweep.seeds),
        "ss_delta": plan.delta, "ss_size_policy": plan.size_policy, "ss_public_ok": plan.sizes_declared_public,
        "ss_count_share": plan.count_share, "ss_min_size": plan.min_stratum_size,
        "ss_small_action": plan.small_action, "ss_domain_public": plan.domain_declared_public,
        f"ss_bounds_{slug}": bounds_text(plan.numeric_bounds),
        "ss_me_R": means.R, "ss_me_gamma": means.gamma, "ss_me_runs": means.runs, "ss_me_noise": means.noise,
        "ss_me_eps": means.group_epsilon, "ss_me_spread": means.spread, "ss_me_weights": means.weights,
        "ss_me_count_eps": means.count_epsilon, "ss_cp_alpha": means.coinpress_alpha, "ss_cp_k": means.coinpress_k,
        "ss_requested": {"setup": plan.setup().digest(),
                         **{k: getattr(plan, k) for k in ("sweep", "marginals", "release") if getattr(plan, k)}},
    }
    if plan.release is not None:
        values.update({"ss_rel_eps": plan.release.epsilon, "ss_rel_method": plan.release.method,
                       "ss_rel_seed": plan.release.seed})
    for f in SYNTHESIZERS[plan.synthesizer].params.__dataclass_fields__:
        values[f"ss_{plan.synthesizer}_{f}"] = getattr(plan.params, f)
    return values
