"""The shared sidebar: which model on which backend, which text, how things look; and the device in use."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from attnviz import api, escape
from attnviz.figures.layout import MAIN_PX
from attnviz.figures.stat_charts import STAT_GRID_MIN_PX
from attnviz.figures.style import DEFAULT_PALETTE, PALETTES, Style
from attnviz.tokens import MAX_CHARS, check_text
from attnviz.ui import cache, state

DEFAULT_TEXT = "The animal didn't cross the street because it was too tired."
# choice -> (what the menu says, model, backend); "hub" takes its model from a second box. What the menu says is
# short enough to be read whole in the sidebar's box at 16 px (its 300 px): "BERT · all-MiniLM-L6-v2 (bundled,
# Hugging Face)" showed as "BERT · all-MiniLM-L6-v2 (bundled". MODEL_HELP says the rest. A projector's 1.5x fonts
# still cut them (146 px of room): a sidebar wider by as much took the room a projector's Model overview grid needs.
CHOICES: dict[str, tuple[str, str | None, api.Backend]] = {
    "default": ("BERT · all-MiniLM-L6-v2", api.DEFAULT_MODEL, "hf"),
    "scratch": ("BERT · from scratch", api.DEFAULT_MODEL, "scratch"),
    "smollm2": ("SmolLM2-135M (decoder)", "smollm2", "hf"),
    "smollm2-scratch": ("SmolLM2 · from scratch", "smollm2", "scratch"),
    "gemma3": ("Gemma 3 270M (decoder)", "gemma3", "hf"),
    "hub": ("Another model…", None, "hf"),  # the box under it says which: typed, or a list
}
MODEL_HELP = (
    "**BERT · all-MiniLM-L6-v2**: an encoder, bundled, run by Hugging Face transformers. **SmolLM2-135M** and "
    "**Gemma 3 270M** (with sliding windows): decoder LLMs, bundled. **From scratch**: the same weights run on "
    "attnviz's own multi-head attention, written from Q, K and V up. **Another model**: one of those the person "
    "running this server lets it load."
)
GLOSSARY = (  # the words a student meets on the pages, each once, in plain words (the sidebar's "Words" popover)
    (
        "Token",
        "A piece of the text as the model reads it: a word, part of a word (“##ing”, “ing”), a mark, or a "
        "marker of the model's own ([CLS], [SEP]).",
    ),
    (
        "Query, key",
        "Each token asks (its query) and offers (its key). Rows of a map are queries, the token looking; "
        "columns are keys, the token looked at.",
    ),
    (
        "Attention weight",
        "How much of a query's attention goes to one key: 0 to 1, each row sums to 1. The colour bar "
        "beside a map gives the scale.",
    ),
    (
        "Head, layer",
        "A head is one attention pattern; a layer has several heads side by side, and the model stacks "
        "layers. “L3 H5”: layer 3, head 5 (counted from 1).",
    ),
    ("Masked (causal)", "A token may look only at itself and what came before it: the grey triangle of a decoder."),
    ("Previous-token head", "A head whose queries mostly look at the token just before them (“prev” in tables)."),
    (
        "Entropy, nats",
        "How spread out a row's attention is: 0 when all of it goes to one token, higher when it is "
        "spread; nats are entropy measured with the natural logarithm.",
    ),
    ("Logit", "The model's raw score for each possible next token, before softmax turns scores into probabilities."),
    ("Loss", "How surprised the model is by the right next token (minus the log of its probability), in nats."),
    (
        "Knocking out, patching",
        "Setting one head's output to zero (or its mean) to see what the model loses; patching "
        "copies a head's output from another text.",
    ),
    (
        "Rollout",
        "Attention followed through every layer, counting the residual connection: where a token's "
        "information came from, roughly.",
    ),
    ("Pooled", "A long text's map averages blocks of tokens into one cell (“pooled 4×4”); pick one head for detail."),
    (
        "‖αf(x)‖ (weighted by what each key sends)",
        "A head's attention weight α times the length of what the key "
        "sends through the head (its value after the output projection, f(x); Kobayashi et al. 2020): a key looked at "
        "a lot that sends little scores low.",
    ),
    (
        "ARENA",
        "An open course in mechanistic interpretability (the Alignment Research Engineer Accelerator); the "
        "Induction page computes its scores as the course's chapters 1.2 and 1.4 do.",
    ),
    (
        "bench/RESULTS.md",
        "The file of the project's measurements, in its source code's folder: each figure a page "
        "quotes is there, with the command that measured it and the machine it ran on.",
    ),
)
PHONE_MAX_PX = 768  # Streamlit's medium breakpoint: at this width and less the sidebar starts folded (a phone)
GRID_MIN_PX = MAIN_PX[False]  # the main column at 1280x800, sidebar open (820 px): the narrowest a grid is drawn
WRAP_CSS = (  # our own constant CSS: a page's name and a widget's label wrap onto a second line, never an ellipsis
    "<style>[data-testid=stSidebarNav] a span, [data-testid=stSidebarNav] [data-testid=stMarkdownContainer], "
    "[data-testid=stSidebarNav] p, [data-testid=stWidgetLabel] [data-testid=stMarkdownContainer], "
    "[data-testid=stWidgetLabel] p { white-space: normal; overflow: visible; text-overflow: clip; min-width: 0; "
    "max-width: 100%; }"
    # the main area's copy of the Text box (phone_text_box) shows only where Streamlit folds the sidebar away; there
    # plotly's toolbar, which a tap shows over a figure's top, would cover its title (the page has its own exports)
    f"@media (min-width: {PHONE_MAX_PX + 1}px) {{ .st-key-phone-text {{ display: none; }} }}"
    f"@media (max-width: {PHONE_MAX_PX}px) {{ [data-testid=stMain] .modebar-container {{ display: none; }} }}"
    # plotly's bar of buttons over a chart, which a pointer over the chart shows at its top right, with three buttons,
    # not eight: a PNG, back to the whole map, full screen. Eight covered the right end of a title in 18 charts of ten
    # pages at 1280 px ("mask: sliding window (1 = may att…", One head vs many's "head 2"), the room's view of a map
    # its teacher points at; a drag still zooms (plotly's default), a double click still resets
    "[data-testid=stMain] .modebar-group:has(> .modebar-btn[data-attr=dragmode]) { display: none; } "
    "[data-testid=stMain] .modebar-btn:is([data-val=in], [data-val=out], [data-val=auto]) { display: none; } "
    # the Class page's QR code (classroom.join_screen) 2rem under its box's heading: the image's toolbar, which a
    # pointer over the image shows 2.75rem above it, covered the heading's last words, on a projector too (the pointer
    # rests there after Start a class)
    ".st-key-join-qr { padding-top: 2rem; } "
    # a table 2rem lower, for the same toolbar (search, download, full screen) over its top right: in half the
    # column on a projector it covered "before:" of Knock out's "Next token after ‘.’, before:" (2026-11-30)
    "[data-testid=stMain] [data-testid=stElementContainer]:has([data-testid=stDataFrame]) { margin-top: 2rem; } "
    # a layer grid where the browser is not a phone's (widgets.grid_box): never narrower than the laptop's column it
    # is laid out for, or plotly's gutters, fractions of its width, shrink under each map's row labels and put them
    # on the map to their left (a 1,100 px window: 18 px over); a narrower window scrolls it sideways instead
    f"[class*=st-key-wide-grid-] {{ overflow-x: auto; }} "
    f"[class*=st-key-wide-grid-] [data-testid=stElementContainer] {{ min-width: {GRID_MIN_PX}px; }}"
    # columns of text under the box's figure (widgets.under) scroll with it: the row as wide as the figure, each
    # column's text as wide as its column
    f"[class*=st-key-under-] [data-testid=stHorizontalBlock] {{ min-width: {GRID_MIN_PX}px; }} "
    "[class*=st-key-under-] [data-testid=stElementContainer] { min-width: 0; }"
    # a row of figures (widgets.wide_columns) the same way: its columns share the laptop column's width, no less
    f"[class*=st-key-wide-row-] {{ overflow-x: auto; }} "
    f"[class*=st-key-wide-row-] [data-testid=stHorizontalBlock] {{ min-width: {GRID_MIN_PX}px; }}"
    # a layer x head grid of words (widgets.stat_box) never narrower than the plot its words were sized for
    f"[class*=st-key-stat-grid-] {{ overflow-x: auto; }} "
    f"[class*=st-key-stat-grid-] [data-testid=stElementContainer] {{ min-width: {STAT_GRID_MIN_PX[False]}px; }}"
    # the line over each of those that says it scrolls (widgets._scrolls: its box's first child, the line's wrapper,
    # hidden whole, or the box's gap stays), shown where the box is narrower than the figure by a pixel or more: a
    # container query on the box's own width
    "[class*=st-key-scrolls-] { container-type: inline-size; } "
    "[class*=st-key-scrolls-] > :first-child { display: none; } "
    f"@container (width < {GRID_MIN_PX - 1}px) {{ [class*=st-key-scrolls-grid-] > :first-child {{ display: flex; }} }}"
    f"@container (width < {STAT_GRID_MIN_PX[False] - 1}px) {{ [class*=st-key-scrolls-stat-] > :first-child "
    "{ display: flex; } }</style>"
)
# Streamlit sizes text in rem, so raising the root font size scales every label and heading together.
# On a projector the open sidebar is SIDEBAR_PX[True] wide, not Streamlit's 300 px, and the main column's side padding
# (Streamlit's 5rem, 120 px at 24 px) is less by as much, so the page's own column keeps its width: at 1.5x in 300 px
# the model box read "BERT · all-MiniL" and the palette "Viridis (colour-bli" (2026-11-30), and a sidebar widened
# alone took the room the Model overview's grid needs at 1920 px. Where the sidebar lies over the page (a narrow
# window) it is left as it is.
SIDEBAR_PX = {False: 300, True: 450}
_OPEN_SIDEBAR = "[data-testid=stSidebar][data-collapsed=false]"
PROJECTOR_CSS = (  # 1.5x the browser's 16 px: every label, a chart's ticks; a projector's grid of words as wide as its
    # plot was laid out for (stat_charts.STAT_GRID_MIN_PX)
    "<style>html { font-size: 24px; } "
    f"@media (min-width: {PHONE_MAX_PX + 1}px) {{ {_OPEN_SIDEBAR} {{ width: {SIDEBAR_PX[True]}px !important; "
    f"min-width: {SIDEBAR_PX[True]}px !important; max-width: {SIDEBAR_PX[True]}px !important; }} "
    f"[data-testid=stAppViewContainer]:has({_OPEN_SIDEBAR}) [data-testid=stMainBlockContainer] {{ "
    f"padding-left: calc(5rem - {(SIDEBAR_PX[True] - SIDEBAR_PX[False]) // 2}px); "
    f"padding-right: calc(5rem - {(SIDEBAR_PX[True] - SIDEBAR_PX[False]) // 2}px); }} }} "
    f"[class*=st-key-stat-grid-] [data-testid=stElementContainer] {{ min-width: {STAT_GRID_MIN_PX[True]}px; }} "
    f"@container (width < {STAT_GRID_MIN_PX[True] - 1}px) {{ [class*=st-key-scrolls-stat-] > :first-child "
    "{ display: flex; } }"
    "</style>"
)


@dataclass(frozen=True)
class Inputs:
    """What the sidebar says: the model, its backend, the text, the look."""

    model: str  # "default" or a hub id
    backend: api.Backend  # "hf" or "scratch"
    text: str
    style: Style


def _from_url() -> None:
    """Seed the model choice from ?model=...&backend=... (and the older ?model=scratch) once per session.

    A link naming a model this server does not offer opens the default, with a notice.
    """
    if state.MODEL_KEY in st.session_state:
        return
    model, backend = st.query_params.get("model"), st.query_params.get("backend")
    if model == "scratch":  # links from before backends had a name
        model, backend = api.DEFAULT_MODEL, "scratch"
    named = [c for c, (_, m, b) in CHOICES.items() if m == (model or api.DEFAULT_MODEL) and b == (backend or "hf")]
    menu = [c for c, (_, m, _) in CHOICES.items() if m == (model or api.DEFAULT_MODEL)]
    if named:
        st.session_state[state.MODEL_KEY] = named[0]
    elif menu:  # a model of the menu on a backend the menu does not pair it with (Gemma 3 on the scratch backend)
        st.session_state[state.MODEL_KEY] = menu[0]
        st.session_state["_notice"] = (
            f"The link asked for {escape.md(api.shown_name(model or api.DEFAULT_MODEL))} on the backend "
            f"{escape.quoted(str(backend), 40)}, which this server does not offer it on, so it is shown on the "
            f"{CHOICES[menu[0]][2]} backend."
        )
    elif model:  # a hub id, a folder, or a bundled model the menu does not name (the date model)
        try:
            name = cache.policy().resolve(model).name
        except api.ModelLoadError:
            st.session_state["_notice"] = (
                f"The link asked for the model {escape.quoted(model, 100)}, which this server does not offer, so "
                "the default model is shown."
            )
            st.session_state[state.MODEL_KEY] = "default"
            return
        st.session_state[state.MODEL_KEY], st.session_state["sb.hub"] = "hub", name
        if backend not in (None, "hf") and name != "dates":  # the date model is built on the scratch engine anyway
            st.session_state["_notice"] = (
                f"The link asked for {escape.quoted(name, 100)} on the backend {escape.quoted(str(backend), 40)}; "
                "a model from the hub box or a folder is shown on the hf backend (Hugging Face's own attention)."
            )


def model_touched(params: dict[str, str]) -> bool:
    """Whether this session's model choice is another model than `params` (the teacher's URL state) names: a
    following student picked one."""
    if "model" not in params or state.MODEL_KEY not in st.session_state:
        return False
    _, model, backend = CHOICES.get(st.session_state[state.MODEL_KEY], (None, None, None))
    if st.session_state[state.MODEL_KEY] == "hub":
        model = str(st.session_state.get("sb.hub") or "").strip() or api.DEFAULT_MODEL
    return (model, backend) != (params["model"], params.get("backend", "hf"))


def sidebar() -> Inputs:
    """Draw the shared sidebar and return what it says; call once per run, from app.py."""
    _from_url()
    state.restore(state.MODEL_KEY, "choice", "default", lambda v: v in CHOICES)
    state.restore("sb.text", "text", DEFAULT_TEXT)
    state.restore("sb.palette", "palette", DEFAULT_PALETTE, lambda v: v in PALETTES)
    state.restore("sb.projector", "projector", False)
    with st.sidebar:
        st.title("attnviz")
        choice = st.selectbox(
            "Model", list(CHOICES), format_func=lambda c: CHOICES[c][0], key=state.MODEL_KEY, help=MODEL_HELP
        )
        _, model, backend = CHOICES[choice]
        if choice == "hub":
            menu = {m for _, m, _ in CHOICES.values()}  # BERT and SmolLM2; the bundled date model is offered here
            model = (
                model_picker("Hub id or model folder", "sb.hub", besides=menu, listed="A model this server offers")
                or api.DEFAULT_MODEL
            )
        text = st.text_input("Text", key="sb.text", help="Press Enter to see its attention.")
        long_text = long_text_input()
        palette = st.selectbox("Palette", list(PALETTES), key="sb.palette")
        projector = st.toggle("Projector mode", key="sb.projector", help="Large fonts and high contrast for classrooms")
        with st.popover("Words used here", width="stretch"):
            st.markdown("\n".join(f"- **{word}.** {meaning}" for word, meaning in GLOSSARY))  # our own constant words
        st.markdown(WRAP_CSS, unsafe_allow_html=True)  # our own constant CSS; never user text
        st.session_state["_device_slot"] = st.empty()
    if projector:
        st.markdown(PROJECTOR_CSS, unsafe_allow_html=True)  # our own constant CSS; never user text
    if notice := st.session_state.pop("_notice", None):
        st.info(notice)
    state.remember("model", model or api.DEFAULT_MODEL)
    state.remember("backend", backend)
    if long_text:  # a chapter is no URL: a link to this view opens the short text
        text = long_text
    else:
        state.remember("text", text)
    state.remember("palette", palette)
    state.remember("projector", projector)
    style = Style(palette, projector, phone=on_phone())
    st.session_state["inputs"] = Inputs(model or api.DEFAULT_MODEL, backend, text, style)
    return st.session_state["inputs"]


def on_phone() -> bool:
    """Whether this session's browser says it is a phone's: "Mobi" in its User-Agent, as phones' browsers (Android's
    "Mobile", the iPhone's) send and tablets' and computers' do not. The server sees no screen's width; this is what
    a phone's first page is laid out by (figures' Style.phone)."""
    try:
        agent = st.context.headers.get("User-Agent") or ""
    except Exception:  # no browser behind this run (a script's or a test's)
        return False
    return "Mobi" in agent


def _from_phone() -> None:
    """The main area's Text box changed: it is the sidebar's text now (a callback, before the sidebar is drawn).

    Only a change the person typed into the box as the last run drew it (`phone.seed`, the text it was drawn with):
    a following student's page that took the teacher's view has no such keys (seat._take clears the session's),
    and the box's old value the browser sends on the next run must neither fail (the key is gone) nor put the
    student's old text over the teacher's."""
    typed, seed = st.session_state.get("phone.text"), st.session_state.get("phone.seed")
    if typed is not None and seed is not None and typed != seed:
        st.session_state["sb.text"] = typed


def phone_text_box() -> None:
    """The Text box again at the top of the main area, for a phone (frame draws it where on_phone): there the sidebar
    starts folded, so the box a page's text comes from was out of sight. CSS (WRAP_CSS) hides it on a wider screen (a
    phone turned, a tablet); it always holds the sidebar's text, and a change to it is one to the sidebar's (the URL,
    a class's view and following go on as before). Not drawn while a long text is in use: the short text is not what
    the page shows then. A computer's page has no second box, hidden or not (one "Text" box to find by its label)."""
    if st.session_state.get("sb.long", "").strip():
        return
    st.session_state["phone.text"] = st.session_state["phone.seed"] = st.session_state.get("sb.text", DEFAULT_TEXT)
    with st.container(key="phone-text"):
        st.text_input("Text", key="phone.text", on_change=_from_phone, help="Press Enter to see its attention.")


LONG_HELP = (
    "For texts of thousands of tokens: SmolLM2 reads up to 8,192, Gemma 3 270M up to 32,768. Past a few hundred "
    "tokens attnviz keeps each layer's queries and keys and computes exact weights only where a view asks (the "
    "Heads and Model overview pages). Clear this box to go back to the short text."
)


def _read_upload() -> None:
    """Put an uploaded .txt into the long-text box (a callback: before the box is drawn), or note why not."""
    upload = st.session_state.get("sb.upload")
    if upload is None:
        return
    try:
        raw = upload.getvalue()
        text = raw.decode("utf-8-sig")
        check_text(text)
    except UnicodeDecodeError:
        st.session_state["_notice"] = "That file is not UTF-8 text: save it as plain text (UTF-8) and upload it again."
        return
    except ValueError as err:
        st.session_state["_notice"] = f"That file could not be used: {escape.md(err)}"
        return
    st.session_state["sb.long"] = text


def long_text_input() -> str:
    """A box for a long passage (typed, pasted or uploaded as .txt); "" when empty."""
    open_now = bool(st.session_state.get("sb.long"))
    with st.expander("Long text: paste a passage or upload a .txt", expanded=open_now):
        st.file_uploader("Upload a .txt", type=["txt"], key="sb.upload", on_change=_read_upload)
        long_text = st.text_area("Long text", key="sb.long", height=160, help=LONG_HELP, max_chars=MAX_CHARS)
        if long_text.strip():
            st.caption(f"In use instead of the text above: {len(long_text):,} characters (not kept in links).")
    return long_text if long_text.strip() else ""


def model_picker(
    label: str,
    key: str,
    help_text: str = "e.g. bert-base-uncased, gpt2, t5-small",
    besides=api.BUNDLED_MODELS,
    listed: str | None = None,
) -> str | None:
    """A model this server offers besides `besides` (the bundled ones): typed when it may download (`label`), else
    picked from a list (`listed`, default `label`: a list holds no folder or hub id to type), a bundled one by what
    it is ("attnviz's date model (dates)").

    None when it offers none (the page says so).
    """
    pol = cache.policy()
    if pol.downloads and not pol.listed:
        return st.text_input(label, key=key, help=help_text).strip() or None
    options = [m for m in pol.offered() if m not in besides]
    if not options:
        st.caption(
            "This server offers no other models: the person running it can add some with "
            f"{api.MODELS_ENV} (see docs/class.md, Serving a classroom)."
        )
        return None
    if st.session_state.get(key) not in options:
        st.session_state[key] = options[0]
    return st.selectbox(
        listed or label,
        options,
        key=key,
        format_func=lambda m: m if api.titled(m) == m else f"{api.titled(m)} ({m})",
        help="The models the person running this server lets it load.",
    )


def show_device() -> None:
    """Fill in the sidebar's device line once the page has loaded the model (app.py calls it last)."""
    inputs = current()
    made = cache.run_request(inputs.model, inputs.backend, inputs.text)  # the page's own: nothing resolved again
    try:
        eng = made.engine if made is not None else cache.engine(inputs.model, inputs.backend)
    except Exception:  # the page has already shown the loading error in full
        return
    st.session_state["_device_slot"].caption(
        f"Device: **{eng.device_name}** · {eng.backend} backend · up to {eng.max_tokens} tokens"
    )


def current() -> Inputs:
    """The inputs the sidebar read in this run (pages call this)."""
    return st.session_state["inputs"]
