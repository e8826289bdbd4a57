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


def test_upload_choice_without_a_file_returns_none_and_asks_for_one(app):
    app.selectbox(key="pk_dataset").set_value("upload").run()
    assert not app.exception
    assert result(app) == "RESULT none"
    assert "Upload a CSV file" in app.info[0].value


def test_bad_default_is_refused():
    from dashboard.components.dataset_picker import pick_microdata

    with pytest.raises(ValueError, match="default must be one of"):
        pick_microdata("x", default="compas")


def upload_script() -> None:
    import io

    import streamlit as st

    import dashboard.components.dataset_picker as picker

    class FakeUpload(io.BytesIO):
        name = "people.csv"

    payload = st.session_state.get("payload", b"")
    original = picker.st.file_uploader
    picker.st.file_uploader = lambda *args, **kwargs: FakeUpload(payload)
    try:
        picked = picker.pick_microdata("up", default="upload")
    finally:
        picker.st.file_uploader = original
    st.markdown("RESULT none" if picked is None else f"RESULT {picked[0]} {picked[1].shape}")


@pytest.mark.parametrize("payload,expected,error", [
    (b"a;b\n" + b"1;2\n" * 12, "RESULT none", "people.csv: The file seems to use a semicolon"),
    (b"a,b\n" + b"x,2\n" * 12, "RESULT people.csv (12, 2)", None),
])
def test_upload_is_validated_and_errors_are_shown(payload, expected, error):
    at = AppTest.from_function(upload_script, default_timeout=60)
    at.session_state["payload"] = payload
    at.run()
    assert not at.exception
    assert result(at) == expected
    if error:
        assert at.error[0].value.startswith(error)
    else:
        assert not at.error and "your upload" in _provenance(at)
