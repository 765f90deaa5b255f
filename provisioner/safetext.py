"""Text that came from a BMC, a fabric or a host, on its way out: to a terminal, a JUnit XML
file, a Prometheus textfile. Nothing such a peer sends may act on what reads the output.

- A terminal must see no control character: an ESC starts a sequence that clears the screen,
  moves the cursor, recolours the rest of a table (a drifted row repainted "ok"), sets the window
  title or opens a hyperlink; a CR or a backspace overwrites what was printed; C1 controls are
  the same sequences in one byte. Bidi overrides and isolates reorder what follows them on the
  line, zero-width and format characters hide text. Each is written as its escape (``\\x1b``,
  ``\\u202e``), so it shows instead of acting, and a person sees that something odd was sent.
- XML 1.0 forbids most C0 controls outright (an ESC or NUL makes the whole JUnit file
  unparseable for CI); the same escapes keep it well-formed and readable.
- A Prometheus label value escapes backslash, double quote and newline (the exposition format's
  own escapes) after the same escaping, so the escapes survive as text.

Every output site calls one of these on every value a peer sent; rich markup escaping stays the
CLI's (cli/errors.py ``plain``), on top of this.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

# Beyond the C0 controls: DEL and the C1 controls; every format character of Unicode 15 (the
# soft hyphen, Arabic number signs and letter mark, the Mongolian vowel separator, zero-width
# space/joiners and LRM/RLM, the bidi embeddings, overrides and isolates, word joiner and
# invisible operators, the BOM, interlinear annotation, Egyptian and shorthand format controls,
# musical formatting, the tag characters that can smuggle invisible text); the line and
# paragraph separators; lone surrogates (a decoder's surrogateescape).
_BEYOND_C0 = (
    "\x7f-\x9f\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f\ud800-\udfff"
)
_TERMINAL = re.compile(f"[\x00-\x1f{_BEYOND_C0}]")
_MULTILINE = re.compile(f"[\x00-\x09\x0b-\x1f{_BEYOND_C0}]")  # keeps \n
# keeps \t and \n (XML allows them; \r it would turn into \n); XML also forbids U+FFFE/FFFF
_XML = re.compile(f"[\x00-\x08\x0b-\x1f{_BEYOND_C0}\ufffe\uffff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    c = match.group()
    if c in _NAMED:
        return _NAMED[c]
    code = ord(c)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def terminal(value: object, *, newlines: bool = False) -> str:
    """``value`` as text a terminal shows and never obeys: every control, bidi and invisible
    format character written as its escape. ``newlines``: keep line breaks (a block of
    text printed as lines); otherwise a newline is escaped too (a table cell, one line)."""
    text = value if isinstance(value, str) else str(value)
    pattern = _MULTILINE if newlines else _TERMINAL
    return pattern.sub(_escape, text) if pattern.search(text) else text


def xml(value: object) -> str:
    """``value`` as text an XML 1.0 file may hold (attribute or element text): what XML forbids
    and what would act on a terminal are escaped; tabs and newlines stay."""
    text = value if isinstance(value, str) else str(value)
    return _XML.sub(_escape, text) if _XML.search(text) else text


def xml_tree(root: ET.Element) -> ET.Element:
    """Every attribute value and text of ``root`` and its descendants through :func:`xml`, in
    place (a renderer builds the tree from peer values, then calls this once)."""
    for el in root.iter():
        for key, val in el.attrib.items():
            el.attrib[key] = xml(val)
        if el.text:
            el.text = xml(el.text)
        if el.tail:
            el.tail = xml(el.tail)
    return root


def prom_label(value: object) -> str:
    """A Prometheus text-format label value (without its quotes)."""
    text = terminal(value)  # a newline is escaped here already
    return text.replace("\\", "\\\\").replace('"', '\\"')
