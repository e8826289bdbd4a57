"""A light Streamlit client: one browser session spoken over Streamlit's own websocket protocol.

What a browser tab does, without drawing anything: it opens `/_stcore/stream` (subprotocol
"streamlit"), asks for a script run with a `BackMsg.rerun_script` (a `ClientState` carrying the
page's URL path, its query string and the widgets' values), and reads `ForwardMsg`s back: a
`new_session` at the start of every run, one `delta` per element drawn (a widget's proto carries
its id, which ends with the widget's user key), `page_info_changed` when the script rewrites the
query string, and `script_finished` when the run is over. A click is one more `rerun_script` whose
widget states hold the button's id with `trigger_value` set; like a browser, the client sends back
the values it has set on other widgets with every run.

Used by `benchmarks/session_load_bench.py` and the protocol tests (`tests/unit/test_stakeholder_*protocol.py`);
it needs only `websockets` and Streamlit's protobufs, so many clients cost the measuring machine little.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

#: `script_finished` statuses (ForwardMsg.ScriptFinishedStatus): a run drawn to the end, a fragment's.
FINISHED_OK = {ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY}


@dataclass
class RunOutcome:
    """One script run as the client saw it: seconds from request to `script_finished`, how it
    ended, and the exceptions the page drew (their messages)."""
    seconds: float
    status: int
    errors: list[str] = field(default_factory=list)


class StreamlitSession:
    """One browser session of a Streamlit app page. Use `await open()`, then `run()` / `click()`."""

    def __init__(self, base_url: str, page: str = "", query: str = "", follow_auto_rerun: bool = False) -> None:
        self.ws_url = base_url.replace("http://", "ws://").rstrip("/") + "/_stcore/stream"
        self.page_name = page          # the page's URL path, as a browser sends it on first load
        self.page_hash = ""            # learnt from the first run's navigation message
        self.query = query
        self.values: dict[str, WidgetState] = {}   # widget values this "user" has set
        self.elements: dict[tuple, object] = {}   # delta path -> Element, for the latest run
        self.fragment_of: dict[tuple, str] = {}    # delta path -> the fragment that drew it ("" for none)
        self._ws = None
        self._reader: asyncio.Task | None = None
        self._finished: asyncio.Future | None = None
        self._errors: list[str] = []
        self._expect_fragment = False
        # A browser reruns a fragment with `run_every` on a timer (ForwardMsg.auto_rerun): done here
        # only when asked, for a page that polls its background work.
        self.follow_auto_rerun = follow_auto_rerun
        self._timers: dict[str, asyncio.Task] = {}
        self.auto_reruns = 0
        self.runs = 0                  # script runs started (new_session messages)

    async def open(self) -> None:
        self._ws = await websockets.connect(self.ws_url, subprotocols=["streamlit"], max_size=None,
                                            open_timeout=60, ping_interval=None)
        self._reader = asyncio.create_task(self._read())

    async def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        if self._reader is not None:
            self._reader.cancel()
        if self._ws is not None:
            await self._ws.close()

    async def _read(self) -> None:
        async for raw in self._ws:
            msg = ForwardMsg()
            msg.ParseFromString(raw)
            kind = msg.WhichOneof("type")
            if kind == "new_session":
                self.runs += 1
                rerun = set(msg.metadata.run.fragment_ids)   # a fragment's run redraws that fragment only
                self.elements = {p: e for p, e in self.elements.items()
                                 if rerun and self.fragment_of.get(p) not in rerun}
                self._errors = []
            elif kind == "navigation":     # st.navigation names the page this run drew
                self.page_hash = msg.navigation.page_script_hash or self.page_hash
            elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
                element = msg.delta.new_element
                self.elements[tuple(msg.metadata.delta_path)] = element
                self.fragment_of[tuple(msg.metadata.delta_path)] = msg.delta.fragment_id
                if element.WhichOneof("type") == "exception":
                    self._errors.append(f"{element.exception.type}: {element.exception.message}")
            elif kind == "page_info_changed":
                self.query = msg.page_info_changed.query_string
            elif kind == "auto_rerun" and self.follow_auto_rerun:
                rerun = msg.auto_rerun
                if rerun.fragment_id not in self._timers:
                    self._timers[rerun.fragment_id] = asyncio.create_task(
                        self._auto_rerun(rerun.fragment_id, rerun.interval))
            elif kind == "stop_auto_rerun":
                for fragment_id in msg.stop_auto_rerun.fragment_ids:
                    timer = self._timers.pop(fragment_id, None)
                    if timer is not None:
                        timer.cancel()
            elif kind == "script_finished":
                status = msg.script_finished
                if status == ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                    continue                   # st.rerun() or a newer request: the run goes on
                if status == ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY and not self._expect_fragment:
                    continue                   # a timed fragment run, not the run awaited
                if self._finished is not None and not self._finished.done():
                    self._finished.set_result(status)

    def _request(self, triggers: tuple[str, ...] = (), fragment_id: str = "", auto: bool = True) -> BackMsg:
        state = BackMsg()
        client = state.rerun_script
        client.query_string = self.query
        client.page_name = "" if self.page_hash else self.page_name
        client.page_script_hash = self.page_hash
        for value in self.values.values():
            client.widget_states.widgets.append(value)
        for widget_id in triggers:
            client.widget_states.widgets.append(WidgetState(id=widget_id, trigger_value=True))
        if fragment_id:
            client.fragment_id = fragment_id
            client.is_auto_rerun = auto
        return state

    async def _auto_rerun(self, fragment_id: str, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            await self._ws.send(self._request(fragment_id=fragment_id).SerializeToString())
            self.auto_reruns += 1

    async def send(self, triggers: tuple[str, ...] = (), fragment_id: str = "") -> asyncio.Future:
        """Ask for one script run (see `run`) without waiting: the future gets its finish status."""
        state = self._request(triggers, fragment_id, auto=False)
        self._expect_fragment = bool(fragment_id)
        self._finished = asyncio.get_running_loop().create_future()
        await self._ws.send(state.SerializeToString())
        return self._finished

    async def run(self, triggers: tuple[str, ...] = (), timeout: float = 300.0, fragment_id: str = "") -> RunOutcome:
        """Ask for one script run with this session's widget values (plus one-shot button
        `triggers`, given as widget ids; `fragment_id`: rerun that fragment only, as a browser does for a
        widget drawn inside it) and wait until it has finished."""
        t0 = time.perf_counter()
        status = await asyncio.wait_for(await self.send(triggers, fragment_id), timeout)
        return RunOutcome(time.perf_counter() - t0, status, list(self._errors))

    def button_id(self, key: str) -> str:
        """The id of the enabled button with user key `key` (LookupError when there is none)."""
        w = self.widget("button", key)
        if w is None or w.disabled:
            raise LookupError(f"the page drew no enabled button with key {key!r}")
        return w.id

    # ------------------------------------------------------------------ widgets of the latest run
    def widgets(self, kind: str) -> list:
        """The widget protos of one kind ("button", "text_input", "checkbox", "radio", ...)."""
        return [getattr(e, kind) for e in self.elements.values() if e.WhichOneof("type") == kind]

    def widget(self, kind: str, key: str):
        """The widget of this kind whose user key is `key` (None when the page did not draw it)."""
        for w in self.widgets(kind):
            if w.id.endswith("-" + key):
                return w
        return None

    def texts(self) -> list[str]:
        """Markdown, headings, progress captions and alerts of the latest run, in drawing order."""
        out = []
        for path in sorted(self.elements):
            e = self.elements[path]
            kind = e.WhichOneof("type")
            if kind == "markdown":
                out.append(e.markdown.body)
            elif kind == "heading":
                out.append(e.heading.body)
            elif kind == "progress":
                out.append(e.progress.text)
            elif kind == "alert":
                out.append(e.alert.body)
        return out

    def set_value(self, kind: str, key: str, **value) -> None:
        """Set a widget's value as a user would (e.g. `string_value="Ana"`, `bool_value=True`)."""
        w = self.widget(kind, key)
        if w is None:
            raise LookupError(f"the page drew no {kind} with key {key!r}")
        self.values[w.id] = WidgetState(id=w.id, **value)

    async def click(self, key: str, timeout: float = 300.0) -> RunOutcome:
        """Press the button with user key `key` and wait for the run it starts to finish."""
        widget_id = self.button_id(key)
        drawn_in = next((self.fragment_of.get(p, "") for p, e in self.elements.items()
                         if e.WhichOneof("type") == "button" and e.button.id == widget_id), "")
        return await self.run((widget_id,), timeout=timeout, fragment_id=drawn_in)
