"""Message content in the shapes clients and dumps use: missing, null, "", a string, or parts.

Also where reasoning hides: leading <think> blocks inside the text (Gym-produced files).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

_TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})
_THINK = re.compile(r"\s*<think>(.*?)</think>", re.DOTALL)


def is_content(value: Any) -> bool:
    return value is None or isinstance(value, str | list)


def text_of(content: Any) -> str:
    """The visible text of a content value: text parts joined with newlines, others ignored."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts: list[str] = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and part.get("type", "text") in _TEXT_PART_TYPES:
                text = part.get("text")
                if isinstance(text, str):
                    texts.append(text)
        return "\n".join(texts)
    return ""


def appended(texts: Sequence[str], sep: str) -> str:
    """What adding each text with `f"{so_far}{sep}{text}" if so_far else text` gives (the texts
    from the first non-empty one on, joined), in one join: adding them one by one is quadratic."""
    for k, text in enumerate(texts):
        if text:
            return sep.join(texts[k:] if k else texts)
    return ""


def split_reasoning(text: str) -> tuple[str | None, str]:
    """Split leading <think>...</think> blocks off a text: (reasoning or None, visible text).

    An unclosed leading <think> (a generation cut off while thinking) is all reasoning.
    """
    if "<think>" not in text:
        return None, text
    thoughts: list[str] = []
    pos = 0
    while True:
        m = _THINK.match(text, pos)
        if not m:
            break
        thoughts.append(m.group(1).strip())
        pos = m.end()
    rest = text[pos:]
    if rest.lstrip().startswith("<think>"):
        thoughts.append(rest.lstrip()[len("<think>") :].strip())
        rest = ""
    if not thoughts:
        return None, text
    return "\n\n".join(thoughts), rest.lstrip()
