"""User text shown inert: names, file names and free text never act as markdown, links or images."""
from __future__ import annotations

import re

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=^])")
_MARKDOWN_ACTIVE = re.compile(r"[\\`*_{}\[\]()#!|<>~$:^]")


def plain(text: object) -> str:
    """User text made inert for st.markdown: every markdown, link, image and emoji character escaped."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", str(text))


def bare(text: object) -> str:
    """User text with markdown's active characters removed, for labels that other components may
    render as markdown and also store."""
    return " ".join(_MARKDOWN_ACTIVE.sub(" ", str(text)).split())
