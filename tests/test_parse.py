"""Parsing notes: frontmatter, titles, headings, links and tags."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from vrom.ingest.parse import mask_code, name_key, note_key, parse_note, split_frontmatter


def test_frontmatter_is_read_and_made_json_ready() -> None:
    text = "---\ntitle: Plan\ncreated: 2026-01-02\ntags: [a, b]\n---\n# Heading\nbody\n"
    frontmatter, body_start, warnings = split_frontmatter(text)
    assert frontmatter == {"title": "Plan", "created": "2026-01-02", "tags": ["a", "b"]}
    assert text[body_start:] == "# Heading\nbody\n"
    assert warnings == []


def test_malformed_frontmatter_warns_and_keeps_the_whole_text() -> None:
    text = "---\naliases:\n- @kepano\n---\nThe body survives.\n"
    note = parse_note(text, "people/kepano.md")
    assert note.frontmatter == {}
    assert note.body_start == 0
    assert len(note.warnings) == 1
    assert "malformed frontmatter at line 3" in note.warnings[0]
    assert note.title == "kepano"


def test_unclosed_and_non_mapping_frontmatter_warn() -> None:
    _, start, warnings = split_frontmatter("---\ntitle: x\nno closing line\n")
    assert start == 0
    assert "not closed" in warnings[0]
    frontmatter, start, warnings = split_frontmatter("---\n- a\n- b\n---\nbody")
    assert frontmatter == {}
    assert "not a mapping" in warnings[0]
    assert start > 0


def test_title_prefers_frontmatter_then_first_h1_then_file_name() -> None:
    assert parse_note("---\ntitle: From FM\n---\n# From H1\n", "a/b.md").title == "From FM"
    assert parse_note("intro\n## Sub\n# From H1\n", "a/b.md").title == "From H1"
    assert parse_note("no headings", "a/My Note.markdown").title == "My Note"


def test_headings_outside_code_only() -> None:
    text = "# Top\n```\n# not a heading\n```\n## Second ##\n####### too deep\n"
    note = parse_note(text, "n.md")
    assert [(h.level, h.text) for h in note.headings] == [(1, "Top"), (2, "Second")]


def test_wikilinks_with_alias_heading_and_embeds() -> None:
    text = "See [[Folder/Target Note#Setup|the setup]] and ![[Diagram.md]] and [[#Local]].\n"
    links = parse_note(text, "src.md").links
    assert [(link.kind, link.target, link.heading, link.alias) for link in links] == [
        ("wikilink", "Folder/Target Note", "Setup", "the setup"),
        ("embed", "Diagram.md", None, None),
        ("wikilink", "", "Local", None),
    ]
    assert links[0].target_key == "folder/target note"
    assert links[1].target_key == "diagram"
    assert links[2].target_key == ""


def test_markdown_links_to_notes_resolve_relative_to_the_note() -> None:
    text = (
        "[a](../Other%20Note.md) [b](sub/c.md#part) [web](https://example.org/x.md) "
        "![img](pic.png) [attachment](file.pdf) [anchor](#here) [root](../../root.md) [up](../../../escape.md)\n"
    )
    links = parse_note(text, "notes/daily/today.md").links
    assert [(link.target_key, link.heading) for link in links] == [
        ("notes/other note", None),
        ("notes/daily/sub/c", "part"),
        ("root", None),
    ]


def test_links_and_tags_inside_code_are_ignored() -> None:
    text = "Use `[[not a link]]` and `#nottag`.\n```\n[[also not]] #nope\n```\n[[Real]] #real\n"
    note = parse_note(text, "n.md")
    assert [link.target for link in note.links] == ["Real"]
    assert note.tags == ["real"]


def test_tags_inline_and_frontmatter_normalised() -> None:
    text = (
        "---\ntags: [Project/Atlas, '#Draft']\ntag: solo\n---\n"
        "Text #Inline, (#paren) and #nested/deep/tag but not a#b, #123 or url.com/#frag.\n"
        "# Heading is not a tag\n"
    )
    note = parse_note(text, "n.md")
    assert note.tags == ["project/atlas", "draft", "solo", "inline", "paren", "nested/deep/tag"]


def test_frontmatter_tags_as_a_string() -> None:
    note = parse_note("---\ntags: alpha, beta gamma\n---\nbody", "n.md")
    assert note.tags == ["alpha", "beta", "gamma"]


def test_keys_for_link_resolution() -> None:
    assert note_key("Folder/My Note.md") == "folder/my note"
    assert note_key("/Folder/Other.markdown") == "folder/other"
    assert name_key("Folder/My Note.md") == "my note"


def test_mask_code_keeps_length_and_lines() -> None:
    text = "a `code` b\n```py\nx = '[[y]]'\n```\nc <!-- [[hidden]] --> d"
    masked = mask_code(text)
    assert len(masked) == len(text)
    assert masked.count("\n") == text.count("\n")
    assert "[[" not in masked
    assert masked.startswith("a ") and masked.endswith(" d")


markdownish = st.text(
    alphabet=st.sampled_from(list("ab #-*[]|!()`~\n:\t\\/.\"'_>{}东京é\x00\r")), max_size=400
)


@settings(max_examples=300, deadline=None)
@given(markdownish)
def test_parsing_never_crashes(text: str) -> None:
    note = parse_note(text, "folder/note.md")
    assert 0 <= note.body_start <= len(text)
    assert isinstance(note.title, str) and note.title
    for heading in note.headings:
        assert note.body_start <= heading.start < len(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_parsing_arbitrary_unicode_never_crashes(text: str) -> None:
    for prefix in ("", "---\n", "---\ntitle: x\n---\n"):
        parse_note(prefix + text, "n.md")


def test_issue27_item9_anchor_links_and_colour_codes_in_links_are_not_tags() -> None:
    note = parse_note(
        "See [the CSS](#css-code), [white (#FFFFFF)](https://example.com/ffffff),"
        " [Background, #FFF](colours.md), ![#abc](swatch.png) and [[Palette|#ddd]];\n"
        "a real #tag, one in brackets (#paren), and #after a link [x](#anchor).\n"
        "[Chromium](https://en.wiki/Chromium_(web)#/Browsers) [a](b.md)#glued\n",
        "colours.md",
    )
    assert note.tags == ["tag", "paren", "after"]  # what follows a link is no tag either
    assert [link.target for link in note.links] == ["colours.md", "Palette", "b.md"]


def test_issue27_item9_a_heading_reads_its_links_as_their_text() -> None:
    note = parse_note(
        "# [NixOS](https://nixos.org) on ![a logo](logo.png)\n"
        "## Install on [[Hardware|my box]] and [[Laptop]] ##\n"
        "### [[#Local]] and [unclosed(x\n",
        "nixos.md",
    )
    assert [heading.text for heading in note.headings] == [
        "NixOS on a logo",
        "Install on my box and Laptop",
        "#Local and [unclosed(x",
    ]
    assert note.title == "NixOS on a logo"
    assert [(link.kind, link.target) for link in note.links] == [
        ("wikilink", "Hardware"),
        ("wikilink", "Laptop"),
        ("wikilink", ""),  # a link to a heading of this note
    ]
