"""Errors found in the papers the tool implements, and what the tool does about each one.

Collected from the review notes of the specs in ``/work/shared/specs/`` (the ``spec`` column
names the file and section). Plain data: the Reproductions page and ``scripts/reproduce.py``
show it as a table.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

__all__ = ["PaperError", "PAPER_ERRORS", "paper_errors_table"]


@dataclass(frozen=True)
class PaperError:
    paper: str
    spec: str
    printed: str
    correct: str
    handling: str


PAPER_ERRORS: tuple[PaperError, ...] = (
    PaperError("Cohen et al. 2021 (ToyDown)", "topdown_districts.md §1.3",
               "Laplace scale 1/eps per level (§3.2)",
               "Scale 2/eps, as Algorithm 2 and the variance 8/eps^2 use",
               "Noise uses sensitivity 2 by default; the sensitivity is a parameter."),
    PaperError("Cohen et al. 2021 (ToyDown)", "topdown_districts.md §1.7",
               "Frag defined as a sum over every node, root included",
               "The root term must be left out: only then is Frag(Greedy) = 90.75",
               "fragmentation() sums non-root nodes; the Reproductions table checks 90.75."),
    PaperError("Cohen et al. 2021 (ToyDown)", "topdown_districts.md §1.7",
               "E Frag(Square) >= 264 on (484, 4, 25), k = 4",
               "The printed formula gives 348.3; the exact mean over all placements is 444.475",
               "The exact mean is computed and shown; the printed bound is not used."),
    PaperError("Ganesh & Zhao (Generalized Gaussian)", "topdown_districts.md §4, §6 item 15",
               "log(1/delta) outside the square root in the error bound; pdf exponent typo in App. B",
               "sqrt(k p ln(1/delta))/eps; density exp(-(|x|/sigma)^p)",
               "Noise is calibrated numerically; the proven constant is shown only as a bound, inside "
               "its valid range (even p >= 4, p <= ln k, delta <= 1/k)."),
    PaperError("Seeman et al. 2022 (partially private data)", "partially_private.md §2.1",
               "Delta_z written with the pair (s1, s1)", "The pair (s1, s2)",
               "Sensitivity is computed over distinct secret pairs."),
    PaperError("Seeman et al. 2022 (partially private data)", "partially_private.md §2.2",
               "Theorem 1's kappa = n eps / Delta on a bounded base measure",
               "kappa = eps / (2 sigma): the printed kernel is twice too sharp and not eps-DP",
               "WEM uses eps / (2 sigma)."),
    PaperError("Seeman et al. 2022 (partially private data)", "partially_private.md §3",
               "Example 2 keeps (Delta, z - mu_Z) inside the sensitivity",
               "The z term cancels: Delta_z = sup |beta_v| Delta",
               "The corrected weight is used."),
    PaperError("Seeman et al. 2022 (partially private data)", "partially_private.md §5.4",
               "Naive WEM on Z^J", "Z^{2J} (two counts per county)", "The naive domain has 2J coordinates."),
    PaperError("Rosenblatt et al. (stratified DP)", "stratification.md §2.4",
               "Theorem 10 with |G_i| = g_i / n and an inequality",
               "|G_i| = g_i n, and the statement is an equality", "Implemented as an equality (checked by Monte Carlo)."),
    PaperError("Rosenblatt et al. (stratified DP)", "stratification.md §2.4",
               "Best case sum log g_i = 20.19 for the NY race counts", "log(n - k + 1) = 12.19",
               "The page shows 12.19."),
    PaperError("Rosenblatt et al. (stratified DP)", "stratification.md §2.2",
               "Clip interval [R - ., R + .]", "[-(R + .), R + .]", "Values are clipped symmetrically."),
    PaperError("Rosenblatt et al. (stratified DP)", "stratification.md §2.3",
               "Recombination (1/k) sum w_i mu_i", "Size-weighted average (correct only if w_i = k g_i / n)",
               "Recombination uses size weights."),
    PaperError("Rosenblatt et al. (stratified DP)", "stratification.md §3.2, §6 item 18",
               "GEM results reported at epsilon 0.01-5",
               "The wrapper spent the nominal epsilon in each of 100 rounds: about 0.30, 3.1, 41 and 428 in total "
               "(delta 1e-9) for nominal 0.01, 0.1, 1 and 5",
               "Our GEM spends exactly the stated total (ledger checked); the synthesis page says the published "
               "GEM figures were not at their stated budgets; the Reproductions table recomputes 3.1 and 41."),
    PaperError("Bun et al. 2025 (demographic coherence)", "coherence.md §5 item 1",
               "Claim 2: P[W1 > alpha] <= 2 (m + 1) mu",
               "P[W1 >= 2 alpha] <= (m + 1) mu: the factor 2 belongs on alpha (the printed claim is false)",
               "Conservative constants (alpha/2) are the default; the printed ones are offered as 'as printed (unproven)'."),
    PaperError("Bun et al. 2025 (demographic coherence)", "coherence.md §3.3",
               "The 2 eps / half-delta relaxation stated for Theorem 8 only",
               "Using it for pure DP (Theorem 7) is an extrapolation", "Tagged as ours where used."),
    PaperError("Jung et al. 2021 (fairness elicitation)", "fairness.md §1.7",
               "Best-response formula without the sum over j", "The sum over j (Algorithm 2)",
               "The learner sums over partners."),
    PaperError("Jung et al. 2021 (fairness elicitation)", "fairness.md §1.3",
               "Exceeding eta makes the problem infeasible (as a feasibility test)",
               "Only a necessary condition; the exact test is (1/|A|) sum w (p_i - p_j)_+ <= eta at gamma = 0",
               "The raw-difference test is not used."),
    PaperError("Causal intersectional ranking (fairness paper d)", "fairness.md §3.3",
               "COMPAS subset of 4,162 rows (Black/White, at least one prior; 25% WM, 59% BM, 6% WF, 10% BF)",
               "Not reproducible from the stated filter: on the 7,214-row ProPublica file it keeps 4,440 rows "
               "(29% / 54% / 7.5% / 9.7%); the paper's further filtering is not stated",
               "The tool applies the stated filter and shows its own counts; the 4,162 is not used as a check."),
    PaperError("Causal intersectional ranking (fairness paper d)", "fairness.md §3.3",
               "Moving company, X resolving: Black men's selection rate about 1.5, White men's just over 1",
               "Impossible under the paper's own model: race has no edge to the lifting test, so once direct "
               "effects are removed White and Black men share one score law and one selection rate (about 1.38 "
               "at k = 50-200 of 2,000 applicants)",
               "The Reproductions table checks both groups against the model's common rate (1.38 +- 0.06, "
               "mean of 50 synthetic companies); the printed 1.5 and 'just over 1' are not used as checks."),
    PaperError("Reich & Vijaykumar 2021 (equal error rates)", "fairness.md §3.1",
               "Theorem 4 written with (alpha_1, alpha_1)", "(alpha_1, alpha_2)",
               "Conditions are written in linear form; the corner (1, 1) is tested separately."),
)


def paper_errors_table() -> pd.DataFrame:
    """One row per error: paper, where the specs note it, what was printed, what is right, how we handle it."""
    return pd.DataFrame([asdict(e) for e in PAPER_ERRORS]).rename(columns={
        "paper": "paper", "spec": "spec", "printed": "what the paper printed", "correct": "what is right",
        "handling": "how the tool handles it"})
