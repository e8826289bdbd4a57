"""Every synthesizer's, districting generator's and noise mechanism's widgets come from its Params.

A plugin added to one of these registries gets its widgets on the page without a page change: each
field is drawn, the untouched widgets build the default Params, and a changed widget reaches the Params.
"""
from streamlit.testing.v1 import AppTest

from core.contracts import param_info
from core.districts import GENERATORS
from core.privacy.mechanisms import MECHANISMS
from core.synthesis import SYNTHESIZERS

REGISTRIES = {"syn": SYNTHESIZERS, "gen": GENERATORS, "mech": MECHANISMS}


def script():
    import streamlit as st

    from core.districts import GENERATORS
    from core.privacy.mechanisms import MECHANISMS
    from core.synthesis import SYNTHESIZERS
    from dashboard.components.params_form import params_widgets
    built = {}
    for name, registry in (("syn", SYNTHESIZERS), ("gen", GENERATORS), ("mech", MECHANISMS)):
        for key, spec in registry.items():
            built[f"{name}:{key}"] = params_widgets(spec, f"t_{name}", persist_state="session")
    st.session_state["built"] = built


def _moved(default, meta):
    """A value other than the default inside the field's bounds."""
    step, high, low = meta.get("step") or 1, meta.get("high"), meta.get("low")
    up = default + step
    value = up if high is None or up <= high else default - step
    return value if low is None or value >= low else low


def test_every_registered_plugin_draws_its_params_and_builds_them():
    at = AppTest.from_function(script, default_timeout=60)
    at.run()
    assert not at.exception
    built = at.session_state["built"]
    for name, registry in REGISTRIES.items():
        for key, spec in registry.items():
            assert built[f"{name}:{key}"] == spec.default_params(), key

    # move every numeric field (bounds respected) and every on/off field; each change reaches its Params
    wanted = {}
    for name, registry in REGISTRIES.items():
        for key, spec in registry.items():
            for f, meta in param_info(spec.params):
                wkey = f"t_{name}_{key}_{f.name}"
                if isinstance(f.default, bool):
                    at.checkbox(key=wkey).set_value(not f.default)
                    wanted[(name, key, f.name)] = not f.default
                elif isinstance(f.default, (int, float)) and meta.get("choices") is None:
                    value = _moved(f.default, meta)
                    at.number_input(key=wkey).set_value(value)
                    wanted[(name, key, f.name)] = value
                elif meta.get("choices") is not None:
                    other = next(c for c in meta["choices"] if c != f.default)
                    at.radio(key=wkey).set_value(other)
                    wanted[(name, key, f.name)] = other
    at.run()
    assert not at.exception
    built = at.session_state["built"]
    assert wanted, "no plugin has a setting"
    for (name, key, field), value in wanted.items():
        assert getattr(built[f"{name}:{key}"], field) == value, (name, key, field)
