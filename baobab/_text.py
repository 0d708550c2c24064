"""The one rule for text a user gives as a name or an email: no hidden characters, one spelling.

Names and emails are shown to other people (listings, the users page, logs), so what a
page shows must be what was stored. Control characters (NUL, tabs, newlines), line and
paragraph separators, and format characters (Unicode category Cf: bidi overrides such as
U+202E, zero-width spaces and joiners, the BOM) either break a line or make the text show
as other text: U+202E followed by ``gro.elpmaxe@nimda`` shows as ``admin@example.org``.
They are refused, not stripped, so that nothing stored differs from what was sent by a
character nobody can see. What is kept is NFC-normalised, so that one name typed on two
keyboards (a precomposed ``é`` or ``e`` plus a combining accent) is one name.

Refusing every Cf character also refuses the zero-width joiner of emoji sequences and the
zero-width non-joiner some scripts use; names and emails do without them.
"""

from __future__ import annotations

import unicodedata

__all__ = ["clean_text"]

# Unicode categories refused: control characters, line and paragraph separators, format characters.
_REFUSED = {"Cc": "control character", "Zl": "control character", "Zp": "control character", "Cf": "format character"}


def clean_text(value: str, what: str) -> str:
    """``value`` NFC-normalised, once it holds no control or format character.

    Args:
        what: how the error names the value (``'name'``, ``email``).

    Raises:
        ValueError: naming ``what``, the character and its position.
    """
    for index, char in enumerate(value):
        kind = _REFUSED.get(unicodedata.category(char))
        if kind is not None:
            name = unicodedata.name(char, "")  # C0 and C1 controls have none
            raise ValueError(
                f"{what} holds the {kind} {char!r}{f' ({name})' if name else ''} at position {index}; "
                "names and emails are one line of visible text"
            )
    return unicodedata.normalize("NFC", value)
