"""Pairwise fairness elicitation: pair sampling, the session store, the learner and its frontier."""
