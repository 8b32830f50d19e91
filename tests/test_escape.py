"""Text from a person reaches markdown and plotly as a literal: every markup character escaped, no link left."""

import pytest

from attnviz import escape
from attnviz.escape import MAX_SHOWN, WORD_JOINER, html_text, md, quoted

MARKUP = "\\`*_{}[]()#+-.!|~:$<>&"


@pytest.mark.parametrize(
    ("typed", "shown"),
    [
        ("**bold** _it_", r"\*\*bold\*\* \_it\_"),
        ("# heading", r"\# heading"),
        ("[click](x)", r"\[click\]\(x\)"),
        (":red[alarm] :material/home:", r"\:red\[alarm\] \:material/home\:"),
        ("$x^2$", r"\$x^2\$"),
        ("<img src=x onerror=alert(1)>", r"\<img src=x onerror=alert\(1\)\>"),
        ("line one\n\n- item\n| a | b |", r"line one \- item \| a \| b \|"),  # no heading, list or table survives
    ],
)
def test_markdown_and_streamlits_directives_are_escaped(typed, shown):
    assert md(typed) == shown


def test_every_markup_character_is_escaped_and_nothing_else_changes():
    out = md("a" + MARKUP + "z")
    assert out == "a" + "".join("\\" + c for c in MARKUP) + "z"
    assert md("plain words, quotes \" ' and = stay") == "plain words, quotes \" ' and = stay"


@pytest.mark.parametrize(
    "typed", ["see https://evil.example/x", "www.evil.example", "mail me@evil.example", "FTP://host/f"]
)
def test_no_bare_link_is_left_for_markdown_to_make(typed):
    out = md(typed)
    for start in ("https", "www", "@", "FTP"):
        if start in typed:
            assert start + WORD_JOINER in out
    assert out.replace(WORD_JOINER, "").replace("\\", "") == typed  # only the joiner and escapes were added


def test_long_text_is_cut_with_an_ellipsis():
    assert md("a" * (MAX_SHOWN + 50)) == "a" * MAX_SHOWN + "…"
    assert md("a" * 10, limit=4) == "aaaa…"
    assert html_text("b" * (MAX_SHOWN + 1)) == "b" * MAX_SHOWN + "…"


def test_quoted_wraps_the_escaped_text():
    assert quoted("it*") == "‘it\\*’"


def test_plotly_text_is_html_escaped_with_newlines_as_breaks():
    assert html_text('<a href="javascript:x">hi</a>\nnext & more') == (
        "&lt;a href=&quot;javascript:x&quot;&gt;hi&lt;/a&gt;<br>next &amp; more"
    )
    assert html_text(42) == "42"  # anything is shown as its text
    assert escape.md(None) == "None"
