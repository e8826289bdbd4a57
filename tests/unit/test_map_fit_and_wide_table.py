"""The district map's zoom fits the whole area into the column it is drawn in, and wide tables say they scroll."""
import numpy as np

from dashboard.components.wide_table import scroll_hint
from core.figures.districts import MAP_FIT_PX, fit_zoom


def _pixels(bounds, zoom):
    """Width and height in screen pixels of ``bounds`` at web-mercator ``zoom`` (512 px per 360 deg at 0)."""
    scale = 512 * 2 ** zoom / 360
    lat = np.radians((bounds[1] + bounds[3]) / 2)
    return (bounds[2] - bounds[0]) * scale, (bounds[3] - bounds[1]) / np.cos(lat) * scale


def test_georgia_fits_the_map_column_and_fills_it():
    georgia = (-85.6, 30.36, -80.84, 35.0)
    w, h = _pixels(georgia, fit_zoom(georgia, *MAP_FIT_PX))
    assert w <= MAP_FIT_PX[0] and h <= MAP_FIT_PX[1]
    # the binding side fills 92% of its room: not zoomed out further than needed
    assert abs(max(w / MAP_FIT_PX[0], h / MAP_FIT_PX[1]) - 0.92) < 1e-9


def test_the_old_900_px_fit_would_have_overflowed_the_column():
    georgia = (-85.6, 30.36, -80.84, 35.0)
    old = min(np.log2(900 * 360 / (512 * (georgia[2] - georgia[0]))),
              np.log2(540 * 360 / (512 * (georgia[3] - georgia[1]) / np.cos(np.radians(32.68)))))
    w, h = _pixels(georgia, old)
    assert h > MAP_FIT_PX[1]         # the old zoom cut the top and bottom districts off


def test_a_narrow_box_zooms_out():
    box = (0.0, 0.0, 1.0, 1.0)
    assert fit_zoom(box, 400, 400) < fit_zoom(box, 800, 800)
    assert abs(fit_zoom(box, 800, 800) - fit_zoom(box, 400, 400) - 1.0) < 1e-12


def test_scroll_hint_counts_columns_and_is_stricter_in_a_side_column():
    assert scroll_hint(6) is None
    assert scroll_hint(7) == "7 columns: scroll the table sideways to see them all."
    assert scroll_hint(5, narrow=True) == "5 columns: scroll the table sideways to see them all."
    assert scroll_hint(3, narrow=True) is None
