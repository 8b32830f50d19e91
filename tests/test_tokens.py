"""Token axes: what engines say about each token, built from the tokenizer's own word ids and offsets."""

from concurrent.futures import ThreadPoolExecutor

import pytest
from transformers import AutoTokenizer

from attnviz.engines import registry
from attnviz.tokens import NO_SPAN, TokenAxis, Tokenizer, number_words


@pytest.fixture(scope="module")
def tok():
    return Tokenizer(AutoTokenizer.from_pretrained(registry.default_model_dir()))


def test_word_numbers_from_word_ids_give_specials_a_word_of_their_own():
    assert number_words([None, 0, 1, 1, 2, None], [True, False, False, False, False, True]) == (0, 1, 2, 2, 3, 4)
    assert number_words([0, 0, 0], [False] * 3) == (0, 0, 0)


def test_an_axis_rejects_mismatched_lengths_and_gaps_in_word_numbers():
    with pytest.raises(ValueError, match="one special flag"):
        TokenAxis(("a", "b"), (False,), (0, 1), (NO_SPAN, NO_SPAN))
    with pytest.raises(ValueError, match="word numbers"):
        TokenAxis(("a", "b"), (False, False), (0, 2), (NO_SPAN, NO_SPAN))
    assert len(TokenAxis((), (), (), ())) == 0


def test_bert_words_spans_and_specials_come_from_the_tokenizer(tok):
    text = "Unbelievably, it works."
    enc = tok.encode(text, 512)
    axis = enc.axis
    assert axis.tokens[0] == "[CLS]" and axis.special[0] and axis.special[-1] and not any(axis.special[1:-1])
    assert [axis.surface(i) for i in range(len(axis))][1:-1] == [text[s:e] for s, e in axis.spans[1:-1]]
    first_word = [i for i, w in enumerate(axis.words) if w == 1]
    assert "".join(axis.surface(i) for i in first_word) == "Unbelievably"
    assert axis.merged().tokens == ("[CLS]", "Unbelievably", ",", "it", "works", ".", "[SEP]")


def test_typed_special_token_names_are_text_not_special_tokens(tok):
    """Typed, a marker's name is the marker's id for the model (Hugging Face's tokenizer gives it so), and text on
    the axis: not flagged (the encode docstring says so; its ids were not checked, and are not text's)."""
    enc = tok.encode("[CLS] is a word here", 512)
    axis = enc.axis
    assert axis.tokens[1] == "[CLS]" and not axis.special[1] and axis.special[0]
    assert enc.ids[1] == enc.ids[0] == tok.hf.cls_token_id


def test_a_cut_text_counts_what_was_dropped(tok):
    enc = tok.encode("one two three four five six", 5)
    assert len(enc.ids) == 5 and enc.truncated == 8 - 5


def test_shifting_right_puts_a_start_token_first(tok):
    axis = tok.encode("die katze", 64, target=True).axis
    shifted = axis.shifted_right("<start>")
    assert shifted.tokens == ("<start>", *axis.tokens[:-1]) and shifted.special[0]
    assert shifted.words[0] == 0 and shifted.words[1] == 1 and shifted.spans[1] == axis.spans[0]


def test_ids_a_model_wrote_get_their_words_back_when_they_re_encode_the_same(tok):
    ids = tok.encode("playing outside", 64, target=True).ids
    axis = tok.axis_for_ids(ids)
    assert axis.text == "playing outside" and axis.merged().tokens[1:3] == ("playing", "outside")
    odd = tok.axis_for_ids([tok.hf.cls_token_id, 2000, 2000])  # re-encodes differently: one word per token
    assert odd.words == (0, 1, 2) and odd.text == ""


def test_subset_and_window_renumber_words():
    axis = TokenAxis(("a", "b", "##c", "d"), (False,) * 4, (0, 1, 1, 2), (NO_SPAN,) * 4)
    assert axis.subset([False, True, True, True]).words == (0, 0, 1)
    assert axis.window(2, 4).tokens == ("##c", "d") and axis.window(2, 4).words == (0, 1)


def test_one_tokenizer_is_safe_from_many_threads(tok):
    texts = [f"sentence {i} about {w}" for i, w in enumerate(["cats", "dogs", "rain", "maps"] * 8)]
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda t: tok.encode(t, 512).ids, texts))
    assert got == [tok.encode(t, 512).ids for t in texts]


def test_a_label_drops_the_word_start_space_and_shows_other_whitespace():
    from attnviz.tokens import shown

    assert [shown(t) for t in (" animal", "\n", "\n\n", " ", "  ", "a\tb", "  foo", "##ing", "\r\n")] == [
        "animal",
        "↵",
        "↵↵",
        "␣",
        "␣␣",
        "a⇥b",
        "␣foo",
        "##ing",
        "↵",
    ]


def test_a_token_that_draws_nothing_is_named_and_a_right_to_left_one_keeps_its_position_last():
    """An emoji's zero-width joiner was a token of its own (SmolLM2, Gemma 3) whose label drew nothing: "·6". And
    "مرحبا ·13" was drawn "13· مرحبا": after Arabic letters the bidi algorithm reads 13 as an Arabic number."""
    from attnviz.tokens import LRM, display_labels, plain_labels, shown

    assert [shown(t) for t in ("\u200d", "\ufe0f", "\u200d\u200d", "\ufeff", "\x85")] == [
        "⟨ZWJ⟩",
        "⟨VS16⟩",
        "⟨ZWJ⟩⟨ZWJ⟩",
        "⟨BOM⟩",
        "⟨U+0085⟩",
    ]
    assert shown("a\u200db") == "a\u200db" and shown("\u0301") == "\u0301"  # something draws: left as it is
    assert display_labels(["מים", "مرحبا", "it", "a<b"]) == [f"מים{LRM} ·1", f"مرحبا{LRM} ·2", "it ·3", "a&lt;b ·4"]
    assert plain_labels(["مرحبا", "it"]) == [f"مرحبا{LRM} ·1", "it ·2"]


def test_an_emoji_s_joiners_have_labels_through_a_real_tokenizer(smollm2_hf):
    axis = smollm2_hf.tokenizer.encode("The family 👨\u200d👩 said", 100).axis
    assert "⟨ZWJ⟩" in axis.tokens and "\u200d" not in axis.tokens, axis.tokens
    assert all(not t.isspace() and t.isprintable() for t in axis.tokens), axis.tokens


def test_byte_level_pieces_are_shown_as_text_and_kept_raw_as_pieces(smollm2_hf):
    text = "The animal\n\nwas  tired 😀 naïve"
    axis = smollm2_hf.tokenizer.encode(text, 100).axis
    assert axis.pieces == ("The", "Ġanimal", "Ċ", "Ċ", "was", "Ġ", "Ġtired", "ĠðŁĺ", "Ģ", "Ġna", "Ã¯ve")
    assert axis.tokens == ("The", "animal", "↵", "↵", "was", "␣", "tired", "😀", "😀", "na", "ïve")
    assert not any(c in "".join(axis.tokens) for c in "ĠĊÃ")
    merged = axis.merged()  # a word's name is its characters; its pieces are its raw pieces joined
    assert merged.tokens[-1] == "naïve" and merged.pieces[-1] == "ĠnaÃ¯ve"
    kept = axis.subset([i % 2 == 0 for i in range(len(axis))])
    assert kept.pieces == axis.pieces[::2] and kept.tokens == axis.tokens[::2]


def test_wordpiece_tokens_stay_as_they_are(tok):
    axis = tok.encode("Playing naïve", 20).axis
    assert axis.tokens == axis.pieces == ("[CLS]", "playing", "naive", "[SEP]")
    axis = tok.encode("unaffable", 20).axis
    assert axis.tokens[1:-1] == axis.pieces[1:-1] and any(t.startswith("##") for t in axis.tokens)


def test_what_a_model_writes_is_text_too(smollm2_hf):
    ids = smollm2_hf.tokenizer.hf(" Paris is\nbig", add_special_tokens=False)["input_ids"]
    axis = smollm2_hf.tokenizer.plain_axis(ids)
    assert axis.tokens == ("Paris", "is", "↵", "big") and axis.pieces[0] == "ĠParis"


def test_a_text_a_page_draws_again_is_encoded_once_and_a_long_one_is_not_kept(tok):
    import attnviz.tokens as tokens

    calls = []
    fresh = Tokenizer(tok.hf)
    hf_call = fresh._call
    fresh._call = lambda *a, **k: calls.append(a) or hf_call(*a, **k)
    first = fresh.encode("The animal didn't cross the street.", 512)
    again = fresh.encode("The animal didn't cross the street.", 512)
    assert again is first and len(calls) == 2  # one encoding (two tokenizer calls: the whole text, then cut)
    assert fresh.encode("The animal didn't cross the street.", 5).ids != first.ids  # another cut, its own
    long = "word " * (tokens.KEPT_CHARS // 5 + 1)
    assert fresh.encode(long, 512) == fresh.encode(long, 512) and len(calls) == 8  # encoded twice, never kept
    with pytest.raises(ValueError):
        fresh.encode("\u200b", 512)  # nothing a model can read: said every time, never kept
    with pytest.raises(ValueError):
        fresh.encode("\u200b", 512)
    for i in range(tokens.KEPT_TEXTS + 5):
        fresh.encode(f"text {i}", 512)
    assert len(fresh._kept) == tokens.KEPT_TEXTS  # the newest texts only
