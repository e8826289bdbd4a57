"""The join link a facilitator shares: built from the address the browser reached, never the bind address."""
import pytest

from dashboard.components.join_link import is_loopback, join_url, page_base, qr_image


def test_link_keeps_the_browsers_host_port_and_path_prefix():
    assert join_url("http://10.0.0.5:8501/fairness-elicitation", "fairness-elicitation", "AB12-CD34") == \
        "http://10.0.0.5:8501/fairness-elicitation?join=AB12-CD34"
    # behind a proxy mounted under /dash, opened from another page with its own query
    assert page_base("https://lab.example.org/dash/home?x=1#top", "fairness-elicitation") == \
        "https://lab.example.org/dash/home/fairness-elicitation"
    assert page_base("https://lab.example.org/dash/fairness-elicitation/", "fairness-elicitation") == \
        "https://lab.example.org/dash/fairness-elicitation"
    assert page_base("http://host:9000/", "fairness-elicitation") == "http://host:9000/fairness-elicitation"


def test_a_page_address_without_a_host_is_refused():
    with pytest.raises(ValueError, match="no host"):
        page_base("/fairness-elicitation", "fairness-elicitation")


def test_loopback_links_are_recognised():
    assert is_loopback("http://127.0.0.1:8501/x") and is_loopback("http://localhost/x")
    assert is_loopback("http://[::1]:8501/x")
    assert not is_loopback("http://192.168.1.20:8501/x") and not is_loopback("https://lab.example.org/x")


def test_qr_image_is_inline_with_a_text_alternative():
    import segno

    tag = qr_image("http://10.0.0.5:8501/fairness-elicitation?join=AB12", "QR code of the join link")
    assert tag.startswith('<img src="data:image/svg+xml') and 'alt="QR code of the join link"' in tag
    size = segno.make("http://10.0.0.5:8501/fairness-elicitation?join=AB12", error="m").symbol_size(scale=5)[0]
    assert f'width="{size}"' in tag and 'src="http' not in tag      # drawn from the page, nothing fetched
