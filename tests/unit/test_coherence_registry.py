"""Release and adversary plugins are whole in their class and one registry line each."""
from __future__ import annotations

import pytest

from core.coherence import ADVERSARIES, RELEASES
from core.coherence.releases import make_release


@pytest.mark.parametrize("registry", [RELEASES, ADVERSARIES], ids=["releases", "adversaries"])
def test_every_registry_line_names_its_class_by_the_class_own_key_and_label(registry):
    for key, spec in registry.items():
        built = spec.build()
        assert (built.key, built.label) == (key, spec.label)
        assert spec.help, key


def test_noisy_tables_say_how_the_secure_sampler_draws_their_noise():
    laplace = make_release("laplace_table", epsilon=0.5)                     # replace-one: L1 sensitivity 2
    assert laplace.secure_noise == ("laplace", pytest.approx(4.0), 2.0)
    gauss = make_release("gaussian_table", epsilon=1.0, neighbour="add_remove")   # rho 1/2, L2 sensitivity 1
    assert gauss.secure_noise == ("gaussian", pytest.approx(1.0), 1.0)      # sigma = 1 / sqrt(2 rho)
    assert {RELEASES[k].build().kind for k in ("laplace_table", "gaussian_table")} == {"table"}
