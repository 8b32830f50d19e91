"""The Corpus page: what each head does across many texts, read from a corpus run (attnviz corpus, api.corpus)."""

from __future__ import annotations

import streamlit as st

from attnviz import api, escape
from attnviz.api import corpus_measure, head_stats
from attnviz.figures import corpus_charts, stat_charts
from attnviz.result import counted, head_name
from attnviz.ui import cache, controls, state, widgets

VALUES = {
    "mean": "mean over the windows",
    "sd": "spread (standard deviation)",
    "q50": "median",
    "q95": "95th percentile",
}
SIZES = (50, 200, 500, 1000)  # documents of the built-in corpus a page may run on
EXTRA_NAMES = {
    "induction": "induction score (repeated random sequences, not the corpus)",
    "prefix": "prefix-matching score (repeated random sequences)",
    "duplicate": "duplicate-token score (repeated random sequences)",
}
QK_TEXTS = 40  # windows whose tokens are placed in the query/key space (at most corpus.qk.MAX_TOKENS tokens)
SHOWN_TOP = 5
CONSTANT = 1e-6  # a head's examples whose values span no more than this: a constant statistic, no examples shown
# The page's own run of 50 paragraphs, pressed in Chromium on a 2-core CPU (bench/pages.py --pages corpora, three
# runs, the worst; bench/RESULTS.md): seconds from the press to the run drawn, the model loaded before.
MEASURED_S = {"default": 3.26, "smollm2": 16.66, "gemma3": 19.42}  # 2026-11-30
MEASURED_DOCS = 50


def _label(run: api.CorpusRun) -> str:
    m = run.manifest
    finished = m.get("finished", "")[:16].replace("T", " ")
    parts = (m["model"], m["corpus"]["name"], f"{m['counts']['windows']:,} windows", finished)
    return " · ".join(p for p in parts if p)


def _start(inputs) -> None:
    """A run of the sidebar's model on part of the built-in corpus (admitted heavy work, with a bar)."""
    with st.expander("Start a run on the built-in corpus (Python's documentation topics, offline)"):
        size = state.bound(
            st.select_slider, "Paragraphs", SIZES, url="size", key="co.size", default=SIZES[1], valid=SIZES.__contains__
        )
        st.caption(
            f"{escape.md(speed(api.corpus_runs(), inputs.model))} A finished run is kept and listed below; the "
            "command line runs whole corpora (`attnviz corpus FOLDER --model NAME`)."
        )
        if not st.button(f"Run {escape.md(api.shown_name(inputs.model)[:60])} on {size:,} paragraphs", key="co.start"):
            return
        bar = cache.LazyBar("measuring the corpus")
        try:
            work = api.corpus_work(inputs.model, size, progress=lambda f, what: bar.step(round(f * 1000), 1000))
            run = cache.get(work)
        except (ValueError, api.ModelLoadError) as err:
            st.error(escape.md(err))
            return
        finally:
            bar.done()
        st.session_state["co.run"] = run.folder.name
        state.remember("run", run.folder.name)
        st.rerun()  # the page again with the run listed, and the caption above saying what it took


def speed(runs: list[api.CorpusRun], model: str) -> str:
    """How long a run of `model` takes, as measured: this server's last run of it on the built-in corpus (its
    manifest's seconds), else the page's runs measured on the machine attnviz is built on (MEASURED_S), never a
    figure for a model no one measured. Plain text."""
    name = api.shown_name(model)
    for run in runs:  # newest first
        m = run.manifest
        if m.get("model") == model and m["corpus"]["name"].startswith("builtin-") and m.get("seconds"):
            docs, took = m["corpus"]["documents"], float(m["seconds"])
            return (
                f"This server's last run of {name} took {_seconds(took)} for {docs:,} paragraphs "
                f"({docs / took:.1f} a second)."
            )
    measured = ", ".join(
        f"{s:.0f} s on {api.shown_name(k)}" for k, s in sorted(MEASURED_S.items(), key=lambda kv: kv[0] != model)
    )
    mine = "" if model in MEASURED_S else f" {name} was not measured."
    return (
        f"A run of {MEASURED_DOCS} paragraphs started from this page on a 2-core CPU took {measured} (the "
        f"slowest of three runs). This server has not run {name} on the corpus yet.{mine}"
    )


def _examples(run: api.CorpusRun, stat: str, layer: int, head: int, texts) -> None:
    """The top queries and a few per decile, each its row over its text, with a way to open it."""
    ex = run.examples
    ex = ex[(ex["stat"] == stat) & (ex["layer"] == layer) & (ex["head"] == head)]
    if ex.empty:
        st.info("This statistic has no examples (it is measured on repeated random sequences, not the corpus).")
        return
    if ex["value"].max() - ex["value"].min() <= CONSTANT:
        st.info(
            f"Every query this run kept for this head (its top queries and its sample of the corpus) has the same "
            f"{escape.md(head_stats.NAMES.get(stat, stat))}, {ex['value'].iloc[0]:.3f}: no query stands out, so "
            "there are no examples to show."
        )
        return
    index = texts.set_index(["doc", "window"])
    top = ex[ex["kind"] == "top"].sort_values("rank").head(SHOWN_TOP)
    deciles = ex[ex["kind"] == "decile"].sort_values(["decile", "rank"], ascending=[False, True])
    tabs = st.tabs([f"Top {len(top)}", "Across the deciles"])
    for tab, rows, what in ((tabs[0], top, "top"), (tabs[1], deciles, "decile")):
        with tab:
            if what == "decile":
                st.caption(
                    "From a fixed sample of the corpus's queries (the same for every head), ranked by this "
                    "head's value: the middle of each tenth, highest first, so that typical behaviour shows "
                    "and not only the extremes."
                )
            else:
                st.caption(f"The highest values over every query of the corpus; {corpus_measure.TIES}.")
            for i, row in enumerate(rows.itertuples()):
                text = index.loc[(row.doc, row.window)]
                tokens = list(text["tokens"])
                where = f"decile {int(row.decile) + 1}" if what == "decile" else f"#{int(row.rank) + 1}"
                st.markdown(
                    f"**{where}** · {escape.md(head_stats.NAMES.get(stat, stat))} {row.value:.3f} · query "
                    f"{escape.quoted(tokens[row.query], 40)} (position {row.query + 1}) in "
                    f"{escape.md(text['source'], 60)}"
                )
                st.markdown(corpus_charts.example_markdown(tokens, int(row.query), list(row.keys), list(row.weights)))
                a, b = st.columns([4, 1])
                a.caption(corpus_charts.keys_line(tokens, list(row.keys), list(row.weights)))
                if b.button("Open", key=f"co.open.{what}.{i}", help="This text on the Heads page, at this head"):
                    widgets.open_head(layer + 1, head + 1, {"model": run.manifest["model"], "text": text["text"]})


def _qk(run: api.CorpusRun, layer: int, head: int, texts, style) -> None:
    """The head's query/key space over the first windows of the run (on demand: it runs the model); a click opens
    the point's text on the Heads page."""
    sample = texts.head(QK_TEXTS)["text"].tolist()
    try:
        source = api.server_source(run.manifest["model"])  # as this server offers the run's model
    except (ValueError, api.ModelLoadError) as err:
        st.info(escape.md(err))
        return
    placed = widgets.qk_space(
        source,
        sample,
        layer,
        head,
        style,
        "co.qkplot",
        f"the first {len(sample)} windows' tokens; click a point to open its text",
    )
    if placed is not None and placed[1] is not None:
        space, token = placed
        widgets.open_head(
            layer + 1, head + 1, {"model": run.manifest["model"], "text": sample[int(space.text_index[token])]}
        )


def run_picker(runs: dict[str, api.CorpusRun], model: str) -> str:
    """The finished run to read (in the URL; at first the newest of the sidebar's model, else the newest of all),
    and what it measured, in a caption."""
    own = [k for k, r in runs.items() if r.manifest.get("model") == model]
    name = state.bound(
        st.selectbox,
        "Run",
        list(runs),
        url="run",
        key="co.run",
        default=(own or list(runs))[0],
        valid=lambda v: v in runs,
        format_func=lambda k: _label(runs[k]),
    )
    m = runs[name].manifest
    skipped = sum(m["corpus"]["skipped"].values())
    st.caption(  # the run's name whole first: a phone's box cuts it
        f"**{escape.md(_label(runs[name]))}**: {escape.md(m['model'])} ({escape.md(m.get('revision', ''))}) on "
        f"{escape.md(m['corpus']['described'])}: "
        f"{counted(m['corpus']['documents'], 'document')}{f' ({skipped:,} skipped)' if skipped else ''}, "
        f"{counted(m['counts']['windows'], 'window')} of at most {m['settings']['window']} tokens "
        f"({m['counts']['documents_cut']:,} cut into several), {counted(m['counts']['tokens'], 'token')}; "
        f"{m['engine']} run, attnviz {escape.md(m['attnviz'])}"
        + (f", {_seconds(float(m['seconds']))}." if m.get("seconds") else ".")
    )
    return name


def _seconds(t: float) -> str:
    """A run's time as the caption gives it: a run of a few short texts takes less than a second, not "0 s"."""
    return f"{t:.1f} s" if t < 9.95 else f"{t:,.0f} s"


def stat_pickers(run: api.CorpusRun) -> tuple[str, str, dict[str, str], dict[str, str]]:
    """The statistic to colour by and its value (mean, sd, a quantile), with the names of what the run computed:
    (stat, value, every name shown, the head statistics computed). As on the Model overview, a statistic that is 0
    by definition is not offered (head_stats.shown_of: a decoder's [CLS] and next token; [SEP] where no window of
    the corpus had one after its first token)."""
    m = run.manifest
    computed = {k: v for k, v in head_stats.NAMES.items() if k in m["stats"]}  # a run may compute some only
    later_special = "sep" in computed and bool((run.grid("sep") > 0).any())
    shown = head_stats.shown_of(m.get("kind", "self"), later_special)
    names = {k: v for k, v in computed.items() if k in shown}
    names |= {k: v for k, v in EXTRA_NAMES.items() if k in m.get("extras", [])}
    row = widgets.control_row("co")
    stat = state.bound(
        row.selectbox,
        "Colour by",
        list(names),
        url="stat",
        key="co.stat",
        default="entropy" if "entropy" in names else next(iter(names)),
        valid=lambda v: v in names,
        format_func=names.get,
        width=widgets.control_px(),
    )
    value = state.bound(
        row.selectbox,
        "Value",
        list(VALUES),
        url="value",
        key="co.value",
        default="mean",
        valid=lambda v: v in VALUES,
        format_func=VALUES.get,
        width=widgets.control_px(),
        disabled=stat in EXTRA_NAMES,
    )
    return stat, "mean" if stat in EXTRA_NAMES else value, names, computed


def head_grid(run: api.CorpusRun, stat: str, value: str, computed: dict, style) -> tuple[int, int]:
    """Every head's value over the corpus, labelled by the Model overview's rule; a click, or the boxes under it,
    picks a head: (layer, head), 0-based."""
    m, texts = run.manifest, run.texts
    labels = [[""] * m["heads"] for _ in range(m["layers"])]  # a head's label needs every statistic
    if m.get("sinks"):  # a corpus run measures no learned sink's share (head_stats.sink_share is the typed text's)
        st.caption(
            "This model's learned sinks take a share of every row that a corpus run does not measure: the heads are "
            "not labelled (the Model overview labels them on a text)."
        )
    elif all(s in m["stats"] for s in corpus_measure.STATS):  # all a run measures (head_stats.NAMES has the sink's)
        means = {s: run.grid(s) for s in corpus_measure.STATS}
        uniform = sum(head_stats.uniform_entropy_of(n, m["kind"]) for n in texts["n_tokens"]) / len(texts)
        labels = head_stats.labels(means, uniform, m["kind"])
    else:
        st.caption(f"This run computed {', '.join(computed)} only: the heads are not labelled.")
    with widgets.stat_box("co"):
        event = st.plotly_chart(
            stat_charts.stat_grid(
                run.grid(stat, value), labels, f"{head_stats.SHORT.get(stat, stat)} ({value})", style=style
            ),
            key="co.grid",
            on_select="rerun",
            selection_mode="points",
        )
    st.caption(
        "Each cell: the head's label from its mean statistics over the corpus (the Model overview's rule) and "
        "the value chosen. A mean here is per window first (its queries averaged, as the Model overview does for "
        "a text), then over the windows, each counting equally; pooling every token instead (as Voita et al. 2019 "
        "do) weighs long windows more. Click a head for its histogram and examples."
    )
    points = event.get("selection", {}).get("points", []) if event else []
    n_l, n_h = m["layers"], m["heads"]
    if points:  # a clicked cell (L3, H5) picks its head: restored values are checked as the URL's are
        st.session_state["co.layer"], st.session_state["co.head"] = stat_charts.head_at(points[0])
    row, px = widgets.control_row("co-head"), widgets.control_px(0.5)
    in_l, in_h = (lambda v: 1 <= v <= n_l), (lambda v: 1 <= v <= n_h)
    layer = state.bound(row.number_input, "Layer", 1, n_l, url="layer", key="co.layer", default=1, valid=in_l, width=px)
    head = state.bound(row.number_input, "Head", 1, n_h, url="head", key="co.head", default=1, valid=in_h, width=px)
    return layer - 1, head - 1


def head_section(run: api.CorpusRun, stat: str, names: dict[str, str], layer: int, head: int, style) -> None:
    """One head: its histogram over the windows and its example queries (or a decoder's extra score)."""
    st.subheader(f"Head {head_name(layer, head)}")
    heads = run.heads
    row = heads[(heads["stat"] == stat) & (heads["layer"] == layer) & (heads["head"] == head)].iloc[0]
    if stat in EXTRA_NAMES:
        st.markdown(f"{escape.md(names[stat])}: **{row['mean']:.3f}** ± {row['sd']:.3f} over {row['count']} sequences.")
        return
    st.plotly_chart(corpus_charts.histogram(row["hist"], row["lo"], row["hi"], names[stat], style=style), key="co.hist")
    st.caption(
        f"Mean {row['mean']:.3f}, sd {row['sd']:.3f}; quantiles 5% {row['q05']:.3f}, 25% {row['q25']:.3f},"
        f" 50% {row['q50']:.3f}, 75% {row['q75']:.3f}, 95% {row['q95']:.3f}; over {row['count']:,} "
        "windows (a window's value averages its queries, as the Model overview does for a text)."
    )
    _examples(run, stat, layer, head, run.texts)


def render() -> None:
    """Draw the page: start a run; pick a finished one, a statistic and a head; the head's spread, examples and
    query/key space."""
    inputs = controls.current()
    st.header("What each head does across a corpus")
    st.caption(
        "A corpus run measures every head on every window of many texts (the command line: `attnviz corpus "
        "PATH --model NAME`; Python: `attnviz.corpus(...)`), with the Model overview's statistics. Here: "
        "their spread over the corpus, each head's histogram, the queries where it is highest and typical "
        "ones, and its query/key space."
    )
    _start(inputs)
    runs = {r.folder.name: r for r in api.corpus_runs()}
    if not runs:
        st.info("No finished corpus run on this server yet: start one above, or run `attnviz corpus` here.")
        return
    name = run_picker(runs, inputs.model)
    run = runs[name]
    stat, value, names, computed = stat_pickers(run)
    layer, head = head_grid(run, stat, value, computed, inputs.style)
    state.show_head(layer, head)
    head_section(run, stat, names, layer, head, inputs.style)
    texts, heads = run.texts, run.heads
    st.subheader("Query/key space")
    _qk(run, layer, head, texts, inputs.style)
    widgets.csv_button(
        "Download every head's statistics (CSV)",
        lambda: heads.drop(columns=["hist"]).to_csv(index=False),
        f"{name}-heads.csv",
        "co.csv",
    )
