"""The link a room opens to join a live session: the address as the facilitator's browser sees it, a copy
button and a QR code drawn here (segno, pure Python: nothing is fetched to draw it)."""
from __future__ import annotations

import html
import json
from urllib.parse import urlencode, urlsplit

import segno
import streamlit as st
import streamlit.components.v1 as components

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]", "::1", "0.0.0.0")
LOOPBACK_NOTE = ("This address is this computer's own (loopback): phones in the room cannot open it. Start the "
                 "dashboard with `make run ADDRESS=0.0.0.0` and open it by the machine's network name or address; "
                 "the link and QR code then follow.")


def page_base(page_url: str, url_path: str) -> str:
    """The address of the page ``url_path`` on the server the browser reached at ``page_url``: its scheme,
    host, port and any path prefix the server is mounted under, without query or fragment.

    ``page_url`` is what the browser's address bar holds (``st.context.url``), so a reverse proxy's host
    and port or a forwarded port are kept, where the server's own bind address would be wrong."""
    parts = urlsplit(page_url)
    if not parts.scheme or not parts.netloc:
        raise ValueError(f"Cannot build a join link from the page address {page_url!r}: it has no host.")
    path = parts.path.rstrip("/")
    if path.endswith("/" + url_path):
        path = path[: -len(url_path) - 1]
    return f"{parts.scheme}://{parts.netloc}{path}/{url_path}"


def join_url(page_url: str, url_path: str, code: str) -> str:
    """The stakeholder's join link: the page with ``?join=CODE``."""
    return f"{page_base(page_url, url_path)}?{urlencode({'join': code})}"


def is_loopback(url: str) -> bool:
    """True when the link names the machine's own loopback address (no other device can open it)."""
    host = (urlsplit(url).hostname or "").lower()
    return host in LOOPBACK_HOSTS or host.startswith("127.")


def browser_page_url() -> str:
    """The current page's address as the browser sent it: ``st.context.url``, else the Host header."""
    url = getattr(st.context, "url", None) or ""
    if url:
        return url
    headers = st.context.headers or {}
    host = headers.get("X-Forwarded-Host") or headers.get("Host") or ""
    scheme = headers.get("X-Forwarded-Proto") or "http"
    return f"{scheme}://{host}/" if host else ""


def qr_image(text: str, label: str, scale: int = 5) -> str:
    """The QR code of ``text`` as an <img> of inline SVG (a data URI: nothing is fetched) with ``label`` as
    its text alternative. Error correction level M: about 15 % of the symbol may be smudged or covered."""
    code = segno.make(text, error="m", micro=False)
    uri = code.svg_data_uri(scale=scale, dark="#000", light="#fff")
    size = code.symbol_size(scale=scale)[0]
    return (f'<img src="{html.escape(uri, quote=True)}" alt="{html.escape(label, quote=True)}" '
            f'width="{size}" height="{size}" style="image-rendering:pixelated;max-width:100%;height:auto">')


def _copy_button_html(text: str, label: str) -> str:
    """A button that copies ``text`` (Clipboard API, else a selected text field) and says that it did."""
    payload = json.dumps(text)
    return f"""<style>body{{margin:0;padding:2px 0}}</style>
<button id="copy" type="button" style="font:600 15px sans-serif;padding:7px 14px;border-radius:8px;
  border:1px solid #1f4e8c;background:#1f4e8c;color:#fff;cursor:pointer">{html.escape(label)}</button>
<span id="done" role="status" aria-live="polite" style="font:14px sans-serif;margin-left:8px;color:#1b1b1b"></span>
<script>
const text = {payload};
document.getElementById('copy').addEventListener('click', async () => {{
  const done = document.getElementById('done');
  try {{ await navigator.clipboard.writeText(text); done.textContent = 'Copied.'; }}
  catch (e) {{
    const field = document.createElement('textarea'); field.value = text; document.body.appendChild(field);
    field.select(); const ok = document.execCommand('copy'); field.remove();
    done.textContent = ok ? 'Copied.' : 'Copy it from the box above.';
  }}
}});
</script>"""


def join_panel(code_shown: str, link: str) -> None:
    """The session's way in: the join code (read aloud), the link with a copy button, and its QR code."""
    left, right = st.columns([3, 1], vertical_alignment="center")
    with left:
        st.markdown("**Join code** (read it aloud):")
        st.markdown(f'<p class="join-code" style="font:700 1.75rem monospace;letter-spacing:.08em;margin:0">'
                    f'{html.escape(code_shown)}</p>', unsafe_allow_html=True)
        st.markdown("**Join link** (share it, or let people scan the QR code):")
        st.code(link, language=None, wrap_lines=True)
        components.html(_copy_button_html(link, "Copy link"), height=44)
        if is_loopback(link):
            st.warning(LOOPBACK_NOTE)
    with right:
        st.html(f'<div class="join-qr">{qr_image(link, "QR code of the join link " + link)}</div>')


# The projector's view: a white layer over the whole window, the QR code as large as the window's shorter
# side allows after the text, the link and code below it in large dark type. The close button (keyed
# ``fe_qr_close``) stays above the layer, in its top right corner.
PROJECTOR_CSS = """<style>
.projector-qr{position:fixed;inset:0;z-index:999990;background:#fff;color:#000;display:flex;flex-direction:column;
  align-items:center;justify-content:center;gap:1.5vh;padding:2vh 2vw;box-sizing:border-box}
.projector-qr img{width:min(74vh,94vw)!important;height:min(74vh,94vw)!important;max-width:none!important}
.projector-qr .projector-link{font:600 clamp(16px,2.6vw,44px) sans-serif;text-align:center;word-break:break-all;
  margin:0;max-width:100%}
.projector-qr .projector-code{font:700 clamp(18px,3.2vw,56px) monospace;letter-spacing:.08em;margin:0}
.st-key-fe_qr_close{position:fixed;top:1rem;right:1rem;z-index:999991;width:auto}
[data-testid="stSidebar"],[data-testid="stSidebarCollapsedControl"],[data-testid="stHeader"]{display:none!important}
</style>"""


def projector_qr(code_shown: str, link: str) -> None:
    """The join link's QR code over the whole window for a projector: dark on white, the link and the
    join code in text under it."""
    st.html(PROJECTOR_CSS + f'''<div class="projector-qr" role="dialog" aria-label="Join QR code, full screen">
{qr_image(link, "QR code of the join link " + link, scale=16)}
<p class="projector-link">{html.escape(link)}</p>
<p class="projector-code">Join code {html.escape(code_shown)}</p></div>''')
