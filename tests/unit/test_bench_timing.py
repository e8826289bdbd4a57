"""The benchmarks' warm timing helper and the collector of their figures (no timed assertions: fake clocks)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import figures  # noqa: E402
import timing  # noqa: E402


class FakeClock:
    """A clock that each call of ``step`` advances by the next of the given durations."""

    def __init__(self, durations):
        self.now, self.durations, self.calls = 0.0, list(durations), 0

    def __call__(self) -> float:
        return self.now

    def step(self) -> None:
        self.calls += 1
        self.now += self.durations.pop(0)


def test_first_call_is_discarded_and_the_rest_give_median_and_range():
    cpu = FakeClock([100.0, 1.0, 3.0, 2.0])             # the first (cold) call is the slow one
    wall = FakeClock([0.0] * 4)
    t = timing.warm_time(lambda: (cpu.step(), wall.__setattr__("now", wall.now + 10 * cpu.calls)),
                         repeats=3, clock=cpu, wall_clock=wall)
    assert cpu.calls == 4
    assert t.cpu == (1.0, 3.0, 2.0)
    assert (t.value.median, t.value.low, t.value.high) == (2.0, 1.0, 3.0)
    assert t.wall == (20.0, 30.0, 40.0)
    assert t.wall_value.median == 30.0


def test_median_of_an_even_count_and_a_refused_repeat_count():
    clock = FakeClock([9.0, 4.0, 1.0, 2.0, 8.0])
    t = timing.warm_time(clock.step, repeats=4, clock=clock, wall_clock=clock)
    assert t.value == timing.Value(3.0, 1.0, 8.0)
    with pytest.raises(ValueError, match="at least 1"):
        timing.warm_time(clock.step, repeats=0)


def test_ratio_is_of_medians_with_the_range_between_runs():
    r = timing.ratio(timing.Value(6.0, 4.0, 9.0), timing.Value(2.0, 1.0, 3.0))
    assert r == timing.Value(3.0, 4.0 / 3.0, 9.0)


def test_value_text():
    assert timing.Value(1.234, 1.0, 1.5).text() == "1.23 s (1.00-1.50)"
    assert timing.Value(2.0, 2.0, 2.0).text("ms", 1) == "2.0 ms"


def test_record_starts_a_run_anew_then_appends(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_RESULTS", str(tmp_path))
    monkeypatch.setattr(sys, "argv", ["benchmarks/demo_bench.py", "--quick"])
    monkeypatch.setattr(timing, "_written", set())
    (tmp_path / "demo_bench.jsonl").write_text('{"stale": 1}\n')
    timing.record("one", timing.Timing((1.0, 3.0, 2.0), (5.0, 5.0, 5.0), 0.7))
    timing.record("two", timing.Timing((1.0, 3.0, 2.0), (4.0, 6.0, 5.0), 0.7), wall=True)
    timing.record("ratio", timing.Value(2.5, 2.0, 3.2), unit="x", load=1.5)
    rows = [json.loads(line) for line in (tmp_path / "demo_bench.jsonl").read_text().splitlines()]
    assert [r["figure"] for r in rows] == ["one", "two", "ratio"]
    assert (rows[0]["median"], rows[0]["low"], rows[0]["high"], rows[0]["clock"], rows[0]["load"]) == (2.0, 1.0, 3.0,
                                                                                                        "CPU", 0.7)
    assert (rows[1]["median"], rows[1]["low"], rows[1]["high"], rows[1]["clock"]) == (5.0, 4.0, 6.0, "wall")
    assert rows[2]["unit"] == "x" and rows[2]["load"] == 1.5
    assert rows[0]["command"].endswith("demo_bench.py --quick")


def test_collector_table(tmp_path):
    rows = [timing.Figure("ToyDown | released", 1.5, 1.31, 1.82, "s", "CPU", 2.04, "2026-01-02 03:04", "python b.py"),
            timing.Figure("ratio", 2.5, 2.0, 3.2, "x", "CPU", 0.5, "2026-01-02 03:05", "python b.py"),
            timing.Figure("memory", 560.4, 560.4, 560.4, "MB", "-", 0.5, "2026-01-02 03:05", "python b.py")]
    (tmp_path / "b_bench.jsonl").write_text("".join(json.dumps(r.__dict__) + "\n" for r in rows))
    (tmp_path / "a_bench.jsonl").write_text(json.dumps(rows[1].__dict__ | {"figure": "first"}) + "\n")
    read = figures.read(tmp_path)
    assert [f.figure for f in read] == ["first", "ToyDown | released", "ratio", "memory"]
    lines = figures.table(read).splitlines()
    assert lines[0] == figures.HEADER.splitlines()[0] and len(lines) == 6
    assert lines[3] == "| ToyDown \\| released | 1.50 s (1.31-1.82) | CPU | 2.0 | 2026-01-02 03:04 | `python b.py` |"
    assert lines[4].split(" | ")[1] == "2.50x (2.00-3.20)"
    assert lines[5].split(" | ")[1] == "560 MB"
