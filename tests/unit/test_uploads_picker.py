"""The dataset picker widget, driven through Streamlit's AppTest."""
from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest



def _provenance(at) -> str:
    """The picker's provenance caption (the one after its pointer to the Data step page)."""
    texts = [c.value for c in at.caption if "Data step" not in c.value]
    assert texts, "the picker drew no provenance caption"
    return texts[0]

def picker_script() -> None:
    import streamlit as st

    from dashboard.components.dataset_picker import pick_microdata

    picked = pick_microdata("pk", default="adult")
    if picked is None:
        st.markdown("RESULT none")
    else:
        name, frame = picked
        st.markdown(f"RESULT {name} {frame.shape[0]}x{frame.shape[1]}")


def result(at: AppTest) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("RESULT"))


@pytest.fixture()
def app():
    at = AppTest.from_function(picker_script, default_timeout=60)
    at.run()
    assert not at.exception
    return at


def test_default_choice_returns_the_bundled_frame_with_provenance(app):
    assert result(app) == "RESULT UCI Adult 48842x15"
    assert "48,842 rows x 15 columns" in _provenance(app) and "CC BY 4.0" in _provenance(app)


def test_switching_to_cps(app):
    app.selectbox(key="pk_dataset").set_value("cps").run()
    assert result(app) == "RESULT CPS 1994-95 extract 50000x10"
    assert "seed 20240601" in _provenance(app)


@pytest.mark.slow
def test_the_picker_offers_no_plain_upload_and_points_to_the_data_step(app):
    """One intake: a curator's own file comes through the Data step's declaration, never a page-local upload
    (keyed by its bytes, it could not keep one budget per population)."""
    assert app.selectbox(key="pk_dataset").options == ["CPS 1994-95 extract", "UCI Adult"]
    assert not app.get("file_uploader")
    assert any("declared once on the **Data step**" in c.value for c in app.caption)


def test_a_report_made_on_a_plain_upload_is_pointed_to_the_data_step():
    at = AppTest.from_function(picker_script, default_timeout=60)
    at.session_state["pk_dataset"] = "upload"            # as a report saved before the one intake asks
    at.run()
    assert not at.exception
    assert any("uploaded without a declaration" in i.value and "Data step" in i.value for i in at.info)
    assert result(at) == "RESULT UCI Adult 48842x15"


def test_bad_default_is_refused():
    from dashboard.components.dataset_picker import pick_microdata

    with pytest.raises(ValueError, match="default must be one of"):
        pick_microdata("x", default="compas")
