"""The Class page: start or join a class; the teacher asks, students answer, the teacher reveals the class's answers
beside the model's own; the results as CSV and as a one-file HTML snapshot."""

from __future__ import annotations

import time

import streamlit as st

from attnviz import escape
from attnviz.api import ablation, class_database, class_records, poll_answers, runs
from attnviz.figures import class_charts, interactive, snapshot
from attnviz.result import Attention, Results, head_index
from attnviz.tokens import plain_labels
from attnviz.ui import cache, controls, routes
from attnviz.ui.controls import Inputs
from attnviz.ui.frame import DEFAULT, PAGES
from attnviz.ui.halt import halt
from attnviz.ui.room import panel, seat
from attnviz.ui.room.seat import Seat

FORM_TEXT = {
    "token": "Which word?",
    "head type": "What kind of head?",
    "number": "How much?",
    "which head": "Which head matters most?",
}


def start_or_join() -> None:
    """No class yet: a teacher starts one, a student types a code."""
    st.markdown(
        "A class lets a teacher lead the room: every student who opens the student link sees the teacher's page, "
        "model, text, layer and head within a second or two, answers the teacher's questions, and sees the class's "
        "answers beside the model's own. Classes, answers and who follows live in this server's database and "
        "survive a restart."
    )
    a, b = st.columns(2)
    with a:
        st.subheader("Teach")
        if st.button("Start a class", key="class.start", type="primary"):
            failed = seat.store_error()
            if failed:
                st.error(failed)
                halt()
            code, secret, _ = seat.store().create_class()
            st.session_state["class.code"], st.session_state["class.secret"] = code, secret
            st.session_state["class.new"] = True
            params = {seat.CLASS: code, seat.TEACHER: secret}
            st.switch_page(routes.page_path(seat.CLASS_PAGE), query_params=params)
    with b:
        st.subheader("Join")
        typed = st.text_input("Class code", key="class.join_code", max_chars=12, placeholder="e.g. K7QX2M")
        if typed and seat.store_error():
            st.error(seat.store_error())
        elif typed:
            code = class_records.clean_code(typed)
            try:
                seat.store().get(code)
            except class_records.ClassNotFound as err:
                st.warning(escape.md(err))
            else:
                st.switch_page(routes.page_path(""), query_params={seat.CLASS: code})


QR_PX = 480  # the join screen's QR code, about: 43% of a 1080 px projector's height, 58% of a 800 px laptop's


def teacher_view(here: Seat, inputs: Inputs) -> None:
    """The teacher: the join screen (open until the first question), a question on the last view shown, the
    answers, the reveal. The teacher's own link is never in the main area, which the room may be looking at: it is
    folded in the sidebar's class panel (panel.teacher_links)."""
    if st.session_state.pop("class.new", False):
        st.success(
            f"Class {here.code} started. Your teacher link, which lets anyone lead the class, is folded in the "
            "sidebar under the class: keep it off the projector (it is in your address bar too: project the app "
            "full screen)."
        )
    asked = seat.store().current_poll(here.code) is not None
    with st.expander("Join screen: the class code, its QR code and the address", expanded=not asked):
        join_screen(here)
    st.markdown("Go to any page: the class sees what you see. Come back here to ask a question about it.")
    params = seat.store().get(here.code).view.get("lesson", {})  # the last head a page of the teacher's showed
    layer, head = _index(params.get("layer")), _index(params.get("head"))
    ask(here, inputs, layer, head, params.get("kind"), params.get("page"))
    poll = seat.store().current_poll(here.code)
    if poll is not None:
        poll_status(here, poll.id)
        if poll.revealed:
            results(poll, inputs, here)
    room(here)


def join_screen(here: Seat) -> None:
    """What the room needs to join, large: the QR code, the six-letter code, the student address, the end time in the
    teacher's own time."""
    url = seat.links(here.code)["student_url"]
    a, b = st.columns([1, 1], vertical_alignment="center")
    qr = a.container(key="join-qr")  # room above it for the image's toolbar (controls.WRAP_CSS)
    qr.image(panel.qr_png(url, QR_PX), width="content", caption="Scan to join")  # a phone: its column's width
    with b:
        st.markdown("Class code")
        st.title(here.code, anchor=False)  # letters and digits only (records.clean_code)
        st.markdown("or open")
        st.subheader(escape.md(url.split("://", 1)[-1]), anchor=False)  # the address as text, never a link
        st.caption(f"The class ends at {panel.local_time(seat.store().get(here.code).expires)}.")


@st.fragment(run_every=5.0)
def room(here: Seat) -> None:
    """Who is here, refreshed every 5 s: close the class to new students, remove one (their answers to open
    questions go too)."""
    try:
        _room(here)
    except class_database.DATABASE_ERRORS as err:
        seat.failed(err, st)


def _room(here: Seat) -> None:
    secret = st.session_state["class.secret"]
    with st.expander("Who is here", expanded=False):
        locked = st.toggle(
            "Closed to new students",
            value=seat.store().locked(here.code),
            key="class.lock",
            help="Those already in stay; a new page opening the student link is told the class is closed.",
        )
        if locked != seat.store().locked(here.code):
            seat.store().lock(here.code, secret, locked)
        roster = seat.store().roster(here.code, secret)
        if not roster:
            st.caption("No student seen in the last 30 s.")
            return
        names = {r["student"]: f"{r['name'] or 'no name'} · {r['student'][:6]}" for r in roster}
        st.caption(
            f"{len(roster)} student page(s) seen in the last 30 s: " + ", ".join(escape.md(n) for n in names.values())
        )
        who = st.selectbox(
            "Remove",
            list(names),
            index=None,
            format_func=lambda s: names[s],
            key="class.remove_who",
            placeholder="a student page",
        )
        if who and st.button("Remove from the class", key="class.remove"):
            seat.store().remove(here.code, secret, who)
            seat.forget(here.code)  # this server's pages read the removal at their next run, not a window later
            st.rerun(scope="app")


def _index(raw: str | None) -> int:
    """A 1-based layer or head from the URL state -> 0-based (0 when absent or bad)."""
    try:
        return max(0, int(raw) - 1) if raw is not None else 0
    except ValueError:
        return 0


def shown(results: Results, kind: str | None) -> Attention:
    """The kind of attention the teacher showed (an encoder-decoder has three), else the model's first."""
    return results.get(kind, results.main)


def ask(
    here: Seat, inputs: Inputs, layer: int, head: int, kind_shown: str | None = None, page: str | None = None
) -> None:
    """A question about layer `layer`, head `head` of the current model and text (and the kind of attention shown),
    the last head the teacher showed, on `page`."""
    st.subheader(f"Ask the class about layer {layer + 1}, head {head + 1}")
    titles = {stem: title for stem, title, _ in PAGES}
    title = titles.get(page or DEFAULT) if page is not None else None  # "": the app's own URL (Heads)
    if title:
        st.caption(f"The head you showed last, on the {title} page. Show another head on any page to ask about it.")
    else:
        st.caption(
            "No head shown yet in this class: show one on the Heads page (or any page with a head) to ask about it."
        )
    result = shown(cache.attention_or_stop(inputs.model, inputs.backend, inputs.text, long_ok=True), kind_shown)
    layer, head = min(layer, result.n_layers - 1), min(head, result.n_heads - 1)
    rows, cols = plain_labels(result.target_tokens), plain_labels(result.source_tokens)
    eng = cache.load_engine_or_stop(inputs.model, inputs.backend)
    decoder = runs.can_intervene(eng)  # knocking heads out needs a decoder
    forms = [f for f in class_records.POLL_FORMS if f != "which head" or decoder]
    form = st.radio("Question", forms, horizontal=True, key="class.form", format_func=FORM_TEXT.get)
    query = key = 0
    mode = "zero"
    if form == "which head":  # the same two ways as the Knock out page; the reveal answers in the one asked
        mode = st.radio(
            "Knocked out how",
            ablation.MODES,
            horizontal=True,
            key="class.mode",
            format_func={
                "zero": "zero (output set to 0)",
                "mean": "mean (output set to its mean over a reference corpus)",
            }.get,
        )
    if form in ("token", "number"):
        query = st.selectbox(
            "From the word",
            range(len(rows)),
            index=_pronoun(result.target_tokens),
            format_func=rows.__getitem__,
            key="class.query",
        )
    if form == "number":
        key = st.selectbox("To the word", range(len(cols)), format_func=cols.__getitem__, key="class.key")
    question = {
        "token": f"Layer {layer + 1}, head {head + 1}: which word does “{rows[query]}” attend to most?",
        "head type": f"Layer {layer + 1}, head {head + 1}: what kind of head is this?",
        "number": f"Layer {layer + 1}, head {head + 1}: what percentage of the attention of “{rows[query]}” goes "
        f"to “{cols[key]}”?",
        "which head": f"Which head matters most for this text: which one, knocked out alone ({mode} ablation), "
        "raises the loss the most? (The Knock out and patch page's grid.)",
    }[form]
    st.caption(escape.md(question))
    if st.button("Ask", key="class.ask", type="primary"):
        view = {
            "model": inputs.model,
            "backend": inputs.backend,
            "text": inputs.text,
            "layer": layer,
            "head": head,
            "query": query,
            "key": key,
            "kind": result.kind,
        }
        if form == "which head":
            view["mode"] = mode
        options = {
            "token": cols,
            "head type": list(poll_answers.HEAD_TYPES),
            "which head": poll_answers.head_names(result.n_layers, result.n_heads),
        }.get(form, [])
        seat.store().start_poll(here.code, st.session_state["class.secret"], form, question, options, view)
        seat.wake(here.code)  # this server's followers draw the question now, not at their next heartbeat


def _importance(view: dict):
    """(L, H): each head's loss increase on the poll's text, knocked out alone in the mode the poll asked (zero for a
    poll asked before the mode was stored): the Knock out page's memo."""
    eng = cache.load_engine_or_stop(view["model"], view["backend"])
    mode = view.get("mode", "zero")
    if mode not in ablation.MODES:
        st.error("This poll names no known way of knocking heads out: ask it again.")
        halt()
    with st.spinner(f"Knocking out each head alone ({mode} ablation)…"):
        return cache.importance(eng, view["text"], mode)[0]


def _pronoun(tokens: tuple[str, ...]) -> int:
    """The lesson's word: the first pronoun of the text if it has one, else its second token."""
    bare = [t.lower().lstrip("#") for t in tokens]  # tokens as text: "it", not "Ġit"
    for word in ("it", "they", "she", "he", "them", "her", "him"):
        if word in bare:
            return bare.index(word)
    return min(1, len(tokens) - 1)


@st.fragment(run_every=2.0)
def poll_status(here: Seat, poll_id: int) -> None:
    """How many have answered of those who may, refreshed every 2 s, and the Reveal button."""
    try:
        _poll_status(here, poll_id)
    except class_database.DATABASE_ERRORS as err:
        seat.failed(err, st)


def _poll_status(here: Seat, poll_id: int) -> None:
    store = seat.store()
    poll = store.poll(poll_id)
    if poll is None:  # gone since this run began (the class ended)
        st.info("This question is no longer in the class.")
        return
    _, following = store.students(here.code)
    st.markdown(
        f"**{escape.md(poll.question)}**  \nanswered {store.count(poll.id)} of {store.voters(poll.id)} "
        f"following when it was asked · {following} following now"
    )
    if not poll.revealed and st.button("Reveal", key=f"class.reveal.{poll.id}", type="primary"):
        store.reveal(here.code, st.session_state["class.secret"], poll.id)
        seat.wake(here.code)
        st.rerun(scope="app")


# our own constant CSS: the chart that loads the browser's chart library is never seen
WARM_CSS = "<style>.st-key-class-warm { display: none; }</style>"


def warm_charts() -> None:
    """An empty chart and an empty table, hidden: a student's browser loads and compiles plotly.js and the table's
    code here, while the join screen waits, not when the teacher's first map or first table arrives. A student who
    joined on the Class page had drawn no chart yet, and the first map after it took 2 s for one follower in Chromium
    (0.3 s for the next) and 5-6 s for four on two cores (bench/class_browser.py); the first table (the Model
    overview's) loads 1.6 MB of the browser's code, 0.87 s against 0.47-0.63 s for the next visits with one tab."""
    with st.container(key="class-warm"):
        st.markdown(WARM_CSS, unsafe_allow_html=True)
        st.plotly_chart(interactive.empty_figure(), key="class.warm", config={"staticPlot": True}, theme=None)
        st.dataframe({"": []}, key="class.warm_table")


def student_view(here: Seat) -> None:
    """A student: the current question and an answer; then the reveal."""
    warm_charts()
    poll = seat.store().current_poll(here.code)
    seat.note_poll(poll.id if poll else None, poll.revealed if poll else False)
    if poll is None:
        st.info("No question yet. Your page follows the teacher's; a question will appear here.")
        return
    st.subheader(escape.md(poll.question))
    if poll.revealed:
        mine = seat.store().answered(poll.id, here.student)
        if mine is not None:
            st.caption(f"Your answer: {escape.md(mine)}")
        results(poll, controls.current(), here)
    else:
        answering(here, poll)


@st.fragment
def answering(here: Seat, poll: class_records.Poll) -> None:
    """The answer to an open question: picking one and sending it rerun only this part of the page (a fragment), not
    the whole page: a whole class answers within seconds of the question, beside the followers still drawing it.
    The reveal comes with a whole run (the heartbeat sees it)."""
    try:
        mine = seat.store().answered(poll.id, here.student)
        if mine is None and not seat.store().may_answer(poll.id, here.student):
            st.info(
                "This question was asked before this page joined the class (or while it was exploring alone): "
                "you can answer the next one."
            )
        elif mine is None:
            answer_form(here, poll)
        else:
            st.success(f"Your answer: **{escape.md(mine)}**. Waiting for the teacher to reveal the class's answers.")
    except class_database.DATABASE_ERRORS as err:
        seat.failed(err, st)


def answer_form(here: Seat, poll: class_records.Poll) -> None:
    """Pick a word or a kind of head, or type a number; one answer per poll."""
    answer: str | None
    if poll.form == "number":
        value = st.number_input("Your answer (%)", 0.0, 100.0, 10.0, 1.0, key=f"class.answer.{poll.id}")
        answer = f"{value:g}"
    elif len(poll.options) > 24:  # every head of a model: a list to pick from
        answer = st.selectbox("Your answer", poll.options, index=None, key=f"class.answer.{poll.id}")
    else:
        answer = st.radio("Your answer", poll.options, index=None, key=f"class.answer.{poll.id}", format_func=escape.md)
    sent = st.button("Send", key=f"class.send.{poll.id}", type="primary", disabled=answer is None)
    if sent and answer is not None:  # a disabled button's click cannot come from a browser, but a socket can send it
        try:
            kept = seat.store().answer(poll.id, here.student, answer)
        except (ValueError, class_records.ClassNotFound) as err:
            st.warning(escape.md(err))
            return
        if not kept:
            st.info("You had already answered this question: your first answer counts.")
        # The form gives way to the answer that counts: this part alone when the click reran it alone (a browser),
        # else the page (a whole run that carried the click).
        st.rerun(scope="fragment" if seat.fragment_run() else "app")


def results(poll: class_records.Poll, inputs: Inputs, here: Seat) -> None:
    """The class's answers beside the model's, the head's map, a one-file HTML snapshot, and for the teacher only
    the answers with names (CSV)."""
    view = poll.view
    result = shown(
        cache.attention_or_stop(view["model"], view["backend"], view["text"], long_ok=True), view.get("kind")
    )
    drawn: poll_answers.Drawn
    if poll.form == "which head":
        drawn, right = poll_answers.which_head(_importance(view))
    else:
        drawn, right = poll_answers.model_answer(result, poll.form, view)
    answers = seat.store().results(poll.id)
    total = sum(answers.values())
    share = answers.get(right, 0) / total if total and poll.form != "number" else None
    fig = class_charts.poll_figure(poll.form, poll.options, answers, drawn, style=inputs.style)
    st.plotly_chart(fig, key=f"class.results.{poll.id}")
    said = f"The model: **{escape.md(right)}**" + ("%" if poll.form == "number" else "")
    if share is not None:
        said += f"; {answers.get(right, 0)} of {total} answers agree ({share:.0%})."
    st.markdown(said)
    layer, head = int(view["layer"]), int(view["head"])
    if poll.form == "which head":  # the map of the head the model answered, not of the head last shown
        layer, head = head_index(right)
        st.caption(f"Below: the map of {escape.md(right)}, the model's answer.")
    head_fig = None  # a long text's map is on the Heads page
    if not cache.request_is_long(view["model"], view["backend"], view["text"]):
        eager = cache.attention_or_stop(view["model"], view["backend"], view["text"]).eager(result.kind)
        head_fig = interactive.head_map(eager, layer, head, style=inputs.style)
        st.plotly_chart(head_fig, key=f"class.head.{poll.id}")
    facts = {
        "question": poll.question,
        "model": view["model"],
        "backend": view["backend"],
        "text": view["text"],
        "layer": str(layer + 1),
        "head": str(head + 1),
        "answers": str(total),
        "the model's answer": right,
        "saved": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    head_html, body = snapshot.parts(
        f"attnviz class {poll.code}: {poll.question}", facts, [f for f in (fig, head_fig) if f is not None]
    )
    size = snapshot.size(head_html, body) / 2**20
    a, b = st.columns(2)
    a.download_button(
        f"Snapshot (HTML, {size:.1f} MB, opens offline)",
        lambda: snapshot.html_file(head_html, body),
        f"attnviz_class_{poll.code}_{poll.id}.html",
        "text/html",
        key=f"class.snapshot.{poll.id}",
        on_click="ignore",
    )
    if here.teacher:  # the answers with names are the teacher's; students see the counts above
        secret = st.session_state["class.secret"]
        b.download_button(
            "Answers (CSV)",
            lambda: seat.store().results_csv(poll.code, secret, poll.id),
            f"attnviz_class_{poll.code}_{poll.id}.csv",
            "text/csv",
            key=f"class.csv.{poll.id}",
            on_click="ignore",
        )


def render() -> None:
    """Draw the page."""
    inputs = controls.current()
    st.header("Class")
    here = st.session_state.get("class.seat")
    if here is None:
        start_or_join()
    elif here.teacher:
        teacher_view(here, inputs)
    else:
        student_view(here)
