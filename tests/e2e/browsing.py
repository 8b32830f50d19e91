"""What the browser tests share (tests/e2e/test_browser_*.py; their Chromium and server are tests/conftest.py's
module fixtures `browser` and `server`, one of each per file): typing into the sidebar, and the readability checks of
what a person sees (READABLE_JS, VISIBLE_JS, _readable)."""

from __future__ import annotations

import os
import time

import pytest

from harness.server import CHROMIUM, IDLE_JS, SETTLED_JS
from harness.wire import Wire

SLOW_BROWSER = [  # every browser file's pytestmark: slow, Chromium against a server
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Chromium is not installed (make test installs it)"),
]
HEATMAPS_JS = "() => document.querySelector('.js-plotly-plot')?.data?.filter(d => d.type === 'heatmap').length ?? 0"
FIRST_X_JS = "() => document.querySelector('.js-plotly-plot')?.data?.[0]?.x ?? []"


def _href(pg) -> str:
    return pg.evaluate("() => location.href")


def _wait_for_view(pg, needles: tuple[str, ...], timeout: float = 10.0) -> float:
    """Seconds until the page's address holds every needle (and its main area drew), or AssertionError."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if all(n in _href(pg) for n in needles):
            return time.monotonic() - start
        pg.wait_for_timeout(50)
    wire = "\n".join(_WIRES[pg].lines(150)) if pg in _WIRES else "(not recorded)"
    # a full suite saw a student on two servers not take the teacher's view in 10 s (2026-12-01): what its page
    # showed, and what it and its server last said (its heartbeats, or none)
    raise AssertionError(f"{needles} never reached {_href(pg)}: {pg.evaluate(PAGE_JS)}\nits last messages:\n{wire}")


def _start_class(teacher, base: str) -> tuple[str, str]:
    """The teacher starts a class on the Class page: (code, secret), read off the teacher link it lands on."""
    teacher.goto(f"{base}/classroom")
    teacher.get_by_role("button", name="Start a class").click()
    teacher.get_by_text("Your teacher link, which lets anyone lead the class").wait_for(timeout=60_000)
    _wait_for_view(teacher, ("teacher=",))
    params = teacher.evaluate("() => Object.fromEntries(new URL(location.href).searchParams)")
    return params["class"], params["teacher"]


def _type(pg, text: str) -> None:
    box = pg.get_by_label("Text", exact=True)
    box.fill(text)
    box.press("Enter")


def _wait_for_token(pg, token: str) -> None:
    pg.wait_for_function(f"({FIRST_X_JS})().some(x => x.startsWith({token!r}))", timeout=60_000)


READABLE_JS = r"""() => {
  const out = {bars: [], clipped: [], tickFonts: [], unlabelled: [], crowded: []};
  // a label's text box (Streamlit ends a long one in an ellipsis there), a page's name in the sidebar, the headings
  for (const el of document.querySelectorAll('[data-testid=stWidgetLabel] [data-testid=stMarkdownContainer], '
      + '[data-testid=stWidgetLabel] p, [data-testid=stSidebarNav] a, '
      + '[data-testid=stSidebarNav] a [data-testid=stMarkdownContainer], '
      + '[data-testid=stMain] h1, [data-testid=stMain] h2, [data-testid=stMain] h3')) {
    if (el.offsetParent !== null && el.scrollWidth > el.clientWidth + 1) out.clipped.push(el.innerText.slice(0, 60));
  }
  for (const gd of document.querySelectorAll('[data-testid=stMain] .js-plotly-plot')) {
    // a map's masked cells drawn grey by a trace of their own (interactive.masked_trace) are not a map of their own
    const lay = gd._fullLayout || {};
    const maps = (gd._fullData || []).filter(t => t.type === 'heatmap' && t.name !== 'masked');
    if (!maps.length) continue;
    out.bars.push(maps.some(t => t.coloraxis ? lay[t.coloraxis].showscale : t.showscale));
    const axisOf = a => lay[a.replace(/^x/, 'xaxis').replace(/^y/, 'yaxis')];
    const labelled = t => axisOf(t.yaxis).showticklabels;
    for (const t of maps) {
      for (const [a, values] of [[t.xaxis, t.x], [t.yaxis, t.y]]) {
        const ax = lay[a.replace(/^x/, 'xaxis').replace(/^y/, 'yaxis')];
        if (ax && ax.showticklabels && ax.tickfont) out.tickFonts.push(ax.tickfont.size);
        // A token (or layer, head) axis of up to 64 values: one tick label for each. Not a dimension's axis (d1..,
        // pair 1..), which states its every-k-th rule; rows shared with a panel beside it that labels them count.
        const dims = values && values.every(v => /^(d|pair )\d+$/.test(String(v)));
        const shared = a.startsWith('y') && !ax.showticklabels && maps.some(o => o !== t && labelled(o)
          && o.y && o.y.length === values.length && o.y.every((v, i) => v === values[i]));
        const n = ax && ax.type === 'category' && values && !dims && !shared ? new Set(values).size : 0;
        const shown = ax && ax.showticklabels
          ? (ax._vals || []).filter(v => v.text !== undefined && v.text !== '').length : 0;
        const title = (lay.title && lay.title.text || '').slice(0, 30);
        // Fewer only on a map alone in its row of a figure as wide as the main column (600 px or more: no layout
        // could give each its line, a projector's single panel of 44 keys) whose axis says its rule ("every 4th of 44
        // labelled").
        const row = String(axisOf(t.yaxis).domain);
        // (A one-column strip beside it is no map: a long text's exact window and its column of each row's share
        // outside the window.)
        const ruled = /every \d+\w* (of \d+ )?labelled/.test(ax && ax.title && ax.title.text || '')
          && lay.width >= 600
          && maps.filter(o => String(axisOf(o.yaxis).domain) === row && ((o.z || [])[0] || []).length > 1).length === 1;
        // And a projector's Layer grid, which fits one screen with its tokens labelled on one head, or on hover where
        // the page draws no head alone (its title says so: labelled maps stood one a row, 7,048 px tall for BERT).
        const said = lay.title && lay.title.text || '';
        const oneScreen = /projector: \d+ tokens(, on hover| labelled on one head)/.test(said);
        if (n && n <= 64 && shown < n && !ruled && !oneScreen) out.unlabelled.push(`${title} ${a}: ${shown}/${n}`);
        // and each label a line of its own: ticks at least 0.9 of their font apart (the Compare page's projector
        // panels had 7 px a key for 20 px labels, which ran together)
        if (n && n <= 64 && shown && ax._length / shown < 0.9 * ax.tickfont.size)
          out.crowded.push(`${title} ${a}: ${(ax._length / shown).toFixed(1)} px a label of ${ax.tickfont.size} px`);
      }
    }
  }
  return out;
}"""
READABLE_PAGES = (
    "",
    "start?step=2",  # the first page a student opens: one head large, the pronoun's row outlined
    "?view=Head&layer=3&head=5",
    "inside",
    "compare?date=5/6/21",  # the dates model's three maps in one row (a short date), a paragraph under each
    "compare?source=bert",  # the what-ifs' maps
    "compare?source=llm",  # SmolLM2's masked map beside BERT's, what a decoder's sidebar opens on
    "overview",
    "positions",
    "head_count",
    "masks",
)
# Pages that draw the same whatever the sidebar's model, visited once: the dates model's maps, BERT's what-ifs
# (compare.draw_bert: the bundled BERT on the sidebar's text), SmolLM2 beside BERT (draw_llm: SmolLM2 where the
# sidebar's model is not a bundled decoder), the trained toy models of One head vs many (head_count.render reads
# the style alone) and Positions' maps (formulas, and the bundled BERT's table where the model has none of its own:
# its one part of the sidebar's model is a list of heads, text). A second visit with SmolLM2 drew the same maps
# again, 19 s of a worker.
READABLE_ONCE = ("compare?date=5/6/21", "compare?source=bert", "compare?source=llm", "head_count", "positions")
# Gemma 3's pages whose layout its shape changes (18 layers of 4 heads, a <bos> token, its own steps and window):
# its Model overview's rollout bars had a title 8 px wider than a phone's column, found when every page was read with
# it (2026-11-30; the rest passed, the Heads page's one row of 4 maps among them). About 12 s of a worker a page. The
# Heads page again since: its text is the one that turns on all four view options, whose labels broke in the middle of
# words in four columns at 900 px (found when every page was read again with colour bars checked, 2026-12-02).
READABLE_GEMMA3 = ("", "overview", "inside", "masks")
# What a person sees of every chart's labels (not what is in the DOM): each tick label and title's box, as the browser
# lays it out, inside its figure and its chart element (not cut), off every plot area (not over a map), and no two
# level tick labels of one axis over each other (turned ones: READABLE_JS's spacing). The one-head map's row labels
# were cut to their last character and its axis title lay over the map (margins of 10 px) while READABLE_JS, which
# counts the labels plotly made, passed. No title stands on a map's grey frame (the theme's pad round the plot area,
# which the map's ground fills): every one-line title of interactive.matrix did, 14 px deep on a projector.
VISIBLE_JS = r"""() => {
  const out = [], px = Math.round;
  // a text's box is about 1.33 of its font high; its glyphs about 0.75 of the box
  const glyphs = r => ({left: r.left, right: r.right, top: r.top + r.height / 8, bottom: r.bottom - r.height / 8});
  const meet = (a, b, pad) => a.left < b.right - pad && b.left < a.right - pad
    && a.top < b.bottom - pad && b.top < a.bottom - pad;
  for (const gd of document.querySelectorAll('[data-testid=stMain] .js-plotly-plot')) {
    const lay = gd._fullLayout;
    if (!lay || !lay._plots) continue;
    const box = gd.querySelector('.main-svg').getBoundingClientRect();
    if (box.width === 0) continue;
    const title = ((lay.title && lay.title.text) || '').replace(/<[^>]*>/g, ' ').slice(0, 40);
    const areas = Object.values(lay._plots).filter(p => p.xaxis && p.yaxis).map(p => ({
      left: box.left + p.xaxis._offset, right: box.left + p.xaxis._offset + p.xaxis._length,
      top: box.top + p.yaxis._offset, bottom: box.top + p.yaxis._offset + p.yaxis._length}));
    // a map's grey ground fills the theme's pad round its plot area (margin.pad): a frame no title may stand on
    const ground = (lay.plot_bgcolor || '').replace(/\s/g, '').toLowerCase();
    const pad = ['white', '#fff', '#ffffff', 'rgba(0,0,0,0)', 'transparent'].includes(ground) ? 0 : lay.margin.pad || 0;
    const frames = areas.map(a => ({left: a.left - pad, right: a.right + pad,
                                    top: a.top - pad, bottom: a.bottom + pad}));
    const el = gd.closest('[data-testid=stPlotlyChart]').getBoundingClientRect();
    const fig = {left: Math.max(box.left, el.left), right: Math.min(box.right, el.right),
                 top: Math.max(box.top, el.top), bottom: Math.min(box.bottom, el.bottom)};
    // every map's tick labels: plotly's classes are xtick and ytick on the first map, x2tick, y12tick... on the others
    const ticks = [...gd.querySelectorAll('.cartesianlayer g[class$=tick] > text')]
      .map(t => ({t, r: t.getBoundingClientRect(), axis: t.closest('g[class*=axislayer]').getAttribute('class'),
                  turned: /rotate\((-?[1-9])/.test(t.getAttribute('transform') || '')}))
      .filter(t => t.r.width > 0 && t.t.textContent !== '');
    const titles = [...gd.querySelectorAll('.infolayer g[class$=title] text')].filter(t => !t.closest('.colorbar'))
      .map(t => ({t, r: t.getBoundingClientRect()})).filter(t => t.r.width > 0);
    for (const {t, r} of [...ticks, ...titles]) {
      const what = `${title} | ${t.textContent.slice(0, 24)}`;
      if (r.left < fig.left - 1 || r.right > fig.right + 1 || r.top < fig.top - 1 || r.bottom > fig.bottom + 1)
        out.push(`cut: ${what} (${px(r.left - fig.left)}, ${px(fig.right - r.right)}, ${px(r.top - fig.top)}, `
          + `${px(fig.bottom - r.bottom)} px inside)`);
      if (areas.some(a => meet(r, a, 2))) out.push(`over a plot: ${what}`);
    }
    for (const {t, r} of titles)
      if (frames.some(a => meet(glyphs(r), a, 0)))
        out.push(`on a map's frame: ${title} | ${t.textContent.slice(0, 24)}`);
    // a legend's entries off the title and off every plot (the Masks page's cost legend rose over its title)
    const legend = [...gd.querySelectorAll('.legend .traces')].map(e => e.getBoundingClientRect()).filter(r => r.width);
    const main = titles.filter(({t}) => t.closest('.g-gtitle'));
    for (const r of legend)
      if (main.some(m => meet(glyphs(m.r), r, 1)) || areas.some(a => meet(r, a, 2)))
        out.push(`legend over ${main.some(m => meet(glyphs(m.r), r, 1)) ? 'the title' : 'a plot'}: ${title}`);
    // a colour bar's own labels: none cut, none over another, and its title off them (a Gemma 3 long text's band of
    // 4 heads gave its bar 43 px under its title on a projector: four 20 px labels on one another, 2026-12-02)
    for (const bar of gd.querySelectorAll('.colorbar')) {
      const marks = [...bar.querySelectorAll('.cbaxis g[class$=tick] > text')]
        .map(t => ({t, r: t.getBoundingClientRect()})).filter(m => m.r.width > 0 && m.t.textContent !== '');
      const named = [...bar.querySelectorAll('g[class$=title] text')]
        .map(t => ({t, r: t.getBoundingClientRect()})).filter(m => m.r.width > 0);
      for (const {t, r} of [...marks, ...named])
        if (r.left < fig.left - 1 || r.right > fig.right + 1 || r.top < fig.top - 1 || r.bottom > fig.bottom + 1)
          out.push(`cut: ${title} | colour bar's ${t.textContent.slice(0, 24)}`);
      // and beside its map: a bar down the side stands within 60 px of the plot it colours (a deep model's tiles,
      // centred in a projector's 1,380 px column, stood 400 px from theirs; plotly's own gap is about 20 px)
      const fill = bar.querySelector('.cbfill, .cbfills rect');
      const r = fill ? fill.getBoundingClientRect() : null;
      if (r && r.height > r.width && areas.length) {
        const beside = areas.filter(a => a.top < r.bottom && r.top < a.bottom && a.right <= r.left + 1);
        const gap = beside.length ? r.left - Math.max(...beside.map(a => a.right)) : 0;
        if (gap > 60) out.push(`far: ${title} | colour bar ${px(gap)} px right of its map`);
      }
      const all = [...named, ...marks];
      for (let i = 1; i < all.length; i++) {
        const on = all.slice(0, i).find(o => meet(glyphs(all[i].r), glyphs(o.r), 1));
        if (on) out.push(`overlap: ${title} | colour bar's ${on.t.textContent} / ${all[i].t.textContent}`);
      }
    }
    const level = {};
    for (const t of ticks) if (!t.turned) (level[t.axis] = level[t.axis] || []).push(t);
    for (const ts of Object.values(level))
      for (let i = 1; i < ts.length; i++) {
        const on = ts.slice(0, i).find(o => meet(glyphs(ts[i].r), glyphs(o.r), 1));
        if (on) out.push(`overlap: ${title} | ${on.t.textContent} / ${ts[i].t.textContent}`);
      }
  }
  return out;
}"""
# The text a heatmap writes in its cells (the Model overview's head kinds, the pronoun lab's grid): each line's font
# size in px as drawn, and any line wider than its cell (it would run into the next cell). Issue 51: these stayed
# about 8 px on a projector. `faint`: lines whose colour, as drawn, stands from their cell's colour, as painted (read
# from the heatmap's own image under the line's middle), by less than WCAG's 4.5:1 for small text: plotly's automatic
# choice (#444 or white by lightness) gave 2.5-2.9:1 on the mid-tones of every palette.
CELLS_JS = r"""async () => {
  const sizes = [], over = [], faint = [];
  const lum = c => {
    const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
  };
  const ratio = (a, b) => (Math.max(lum(a), lum(b)) + 0.05) / (Math.min(lum(a), lum(b)) + 0.05);
  const painted = async img => {  // the heatmap's image as drawn into a canvas, and where it stands on the screen
    const src = img.getAttribute('href') || img.getAttribute('xlink:href');
    const pic = new Image();
    await new Promise((ok, no) => { pic.onload = ok; pic.onerror = no; pic.src = src; });
    const canvas = document.createElement('canvas');
    canvas.width = pic.naturalWidth; canvas.height = pic.naturalHeight;
    const ctx = canvas.getContext('2d');
    ctx.drawImage(pic, 0, 0);
    return {ctx, box: img.getBoundingClientRect(), w: pic.naturalWidth, h: pic.naturalHeight};
  };
  for (const gd of document.querySelectorAll('[data-testid=stMain] .js-plotly-plot')) {
    const lay = gd._fullLayout, data = gd._fullData || [];
    const hm = data.find(t => t.type === 'heatmap' && t.texttemplate);
    if (!lay || !hm) continue;
    const named = (lay.title && lay.title.text) || '', bar = (hm.colorbar && hm.colorbar.title || {}).text || '';
    const title = (named && !named.startsWith('Click to enter') ? named : `the grid of ${bar}`)  // not the placeholder
      .replace(/<[^>]*>/g, ' ').slice(0, 40);
    const cell = lay.xaxis._length / Math.max(1, (hm.x || hm.z[0]).length);
    const tall = lay.yaxis._length / Math.max(1, (hm.y || hm.z).length);
    const img = gd.querySelector('.heatmaplayer .hm image');
    const pic = img ? await painted(img) : null;
    for (const t of gd.querySelectorAll('.heatmaplayer .heatmap-label text')) {
      const r = t.getBoundingClientRect();
      if (r.width === 0) continue;
      sizes.push(parseFloat(getComputedStyle(t).fontSize));
      if (r.width > cell + 1 || r.height > tall + 1)
        over.push(`${title} | ${t.textContent.slice(0, 20)}: ${Math.round(r.width)} x ${Math.round(r.height)} px `
          + `in ${Math.round(cell)} x ${Math.round(tall)}`);
      if (!pic) continue;
      const x = Math.floor((r.left + r.width / 2 - pic.box.left) * pic.w / pic.box.width);
      const y = Math.floor((r.top + r.height / 2 - pic.box.top) * pic.h / pic.box.height);
      if (x < 0 || y < 0 || x >= pic.w || y >= pic.h) continue;
      const under = pic.ctx.getImageData(x, y, 1, 1).data;
      if (under[3] < 255) continue;  // a gap (no value): the page's white shows through
      const lines = [...t.querySelectorAll('tspan')].filter(s => !s.querySelector('tspan') && s.textContent.trim());
      for (const line of (lines.length ? lines : [t])) {
        const ink = getComputedStyle(line).fill.match(/[0-9.]+/g).map(Number);
        const got = ratio(ink, under);
        if (got < 4.5)
          faint.push(`${title} | ${line.textContent.slice(0, 20)}: ${got.toFixed(2)}:1, rgb(${ink.slice(0, 3)}) on `
            + `rgb(${[...under.slice(0, 3)]})`);
      }
    }
  }
  return {sizes, over, faint};
}"""
# A map's names (tokens, heads, layers) next to the cells they name: on every figure of one map, the tick labels
# under it and left of it within two of their font's size of its cells (plotly's own standoff is 16-21 px at 12 px;
# a projector's framed maps 26 px at 18). A head grid's click markers once padded both axes (a phone's layer names
# 49 px below the grid), and the tiled overview of every head kept a fixed height (a laptop's head names 69 px below
# its tiles, a phone's about 160).
NAMES_JS = r"""() => {
  const out = [];
  for (const gd of document.querySelectorAll('[data-testid=stMain] .js-plotly-plot')) {
    const imgs = gd.querySelectorAll('.heatmaplayer .hm image');
    if (imgs.length !== 1 || !gd._fullLayout) continue;
    const box = imgs[0].getBoundingClientRect();
    const xs = [...gd.querySelectorAll('g.xtick text')].filter(t => t.getBoundingClientRect().width);
    const ys = [...gd.querySelectorAll('g.ytick text')].filter(t => t.getBoundingClientRect().width);
    const size = parseFloat(getComputedStyle(xs[0] || ys[0] || gd).fontSize) || 12;
    const below = xs.length ? Math.min(...xs.map(t => t.getBoundingClientRect().top)) - box.bottom : 0;
    const left = ys.length ? box.left - Math.max(...ys.map(t => t.getBoundingClientRect().right)) : 0;
    const title = ((gd._fullLayout.title || {}).text || '').replace(/<[^>]*>/g, ' ').slice(0, 40);
    if (below > 2 * size || left > 2 * size)
      out.push(`${title} | names ${Math.round(below)} px below the cells, ${Math.round(left)} px left (${size} px)`);
  }
  return out;
}"""
# A figure wider than its window says so (widgets._scrolls): each box that scrolls sideways (by more than 3 px) has its
# line above it, shown, inside the window, and a box that does not scroll shows none (1-3 px: either). Its right part
# was hidden with the browser's scroll bar its only sign (2026-11-30).
HINT_JS = r"""() => {
  const out = [];
  for (const outer of document.querySelectorAll('[data-testid=stMain] [class*=st-key-scrolls-]')) {
    const name = [...outer.classList].find(c => c.startsWith('st-key-scrolls-')).slice('st-key-scrolls-'.length);
    const hint = outer.querySelector('[class*=st-key-scroll-hint-]');
    const box = outer.querySelector('[class*=st-key-wide-], [class*=st-key-stat-grid-]');
    if (!hint || !box) { out.push(`${name}: hint ${!!hint}, box ${!!box}`); continue; }
    const hidden = box.scrollWidth - box.clientWidth, h = hint.getBoundingClientRect();
    const shown = h.height > 0 && h.width > 0 && h.left >= 0 && h.right <= window.innerWidth + 1;
    if ((hidden > 3 && !shown) || (hidden < 1 && shown))
      out.push(`${name}: ${hidden} px hidden to the right, its line shown ${shown}`);
  }
  return out;
}"""
# What a person reads of the widgets themselves (READABLE_JS's `clipped` reads their labels' boxes): a select's choice
# shown whole in its box (the text's width in the box's font against the box's room), or else whole in the page's text
# (the pronoun lesson quotes its case's sentence; a corpus run's caption starts with its name); and no word of a
# widget's label broken across two lines (a word whose parts lie on two lines); and no other text ended in an ellipsis
# (the export row's "CSV (last panel)" at 900 px). In st.columns, at 900 px, the Model
# overview's select showed "the end tok" of "the end token (Voita et al. 2019)" and a toggle's label read "sentence"
# over "s"; the sidebar's model box showed "BERT · all-MiniLM-L6-v2 (bundled" at every width, and in projector mode
# "BERT · all-MiniL" (its 1.5x fonts in 300 px: controls.SIDEBAR_PX) (2026-11-30).
WIDGETS_JS = r"""() => {
  const out = [], ctx = document.createElement('canvas').getContext('2d');
  const shown = r => r.width > 0 && r.right > 0 && r.left < window.innerWidth;  // a closed sidebar lies off screen
  let said;  // the page's text, read once and only for a choice cut in its box (innerText lays out: 0.4 s on Inside)
  for (const input of document.querySelectorAll('[data-testid=stSelectbox] input')) {
    if (input.offsetParent === null || !input.value || !shown(input.getBoundingClientRect())) continue;
    const css = getComputedStyle(input);
    ctx.font = css.font;
    const room = input.clientWidth - parseFloat(css.paddingLeft) - parseFloat(css.paddingRight);
    const need = ctx.measureText(input.value).width;
    if (need > room + 1 && said === undefined)
      said = (document.querySelector('[data-testid=stMain]') || document.body).innerText;
    if (need > room + 1 && !said.includes(input.value))
      out.push(`a choice cut: ${input.value.slice(0, 40)} (${Math.round(room)} px of ${Math.round(need)})`);
  }
  // a multiselect's chosen items all in its box (a box too narrow scrolls them out of sight: the pronoun lesson's
  // own sentence showed its two candidates as one red "×" at 900 px)
  for (const tags of document.querySelectorAll('[data-testid=stMultiSelectTagsContainer]'))
    if (tags.scrollWidth > tags.clientWidth + 1 && shown(tags.getBoundingClientRect()))
      out.push(`chosen items hidden: ${tags.innerText.replace(/\s+/g, ' ').slice(0, 40)} (${tags.clientWidth} px of `
        + `${tags.scrollWidth})`);
  // any other text the page ends in an ellipsis where its box is too narrow (a figure's label, st.metric's)
  for (const el of document.querySelectorAll('[data-testid=stMain] *, [data-testid=stSidebar] *')) {
    if (el instanceof SVGElement || el.tagName === 'INPUT' || el.scrollWidth <= el.clientWidth + 1) continue;
    if (getComputedStyle(el).textOverflow !== 'ellipsis' || !el.innerText || !shown(el.getBoundingClientRect()))
      continue;
    out.push(`a text cut: ${el.innerText.slice(0, 40)} (${el.clientWidth} px of ${el.scrollWidth})`);
  }
  for (const label of document.querySelectorAll('[data-testid=stWidgetLabel]')) {
    if (label.offsetParent === null || !shown(label.getBoundingClientRect())) continue;
    const walker = document.createTreeWalker(label, NodeFilter.SHOW_TEXT);
    for (let node; (node = walker.nextNode());) {
      const words = /\S+/g;
      for (let m; (m = words.exec(node.data));) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (lines.size > 1) out.push(`a word broken: ${m[0]} (in "${label.innerText.slice(0, 40)}")`);
      }
    }
  }
  return out;
}"""
# Columns of text that belong under a row of panels (widgets.under(name), under grid_box(name)'s figure: Compare's
# paragraph for each kind of attention): each column's middle over its own panel, as the browser lays them out, with
# the box scrolled to its left end and to its right end (panels one under another make no row to check). Drawn after
# the box, the paragraphs did not scroll with the panels: in a 1,000 px window the second stood under the first.
UNDER_JS = r"""() => {
  const out = [];
  for (const box of document.querySelectorAll('[data-testid=stMain] [class*=st-key-wide-grid-]')) {
    const name = [...box.classList].find(c => c.startsWith('st-key-wide-grid-')).slice('st-key-wide-grid-'.length);
    const text = document.querySelector(`.st-key-under-${name} [data-testid=stHorizontalBlock]`);
    const gd = box.querySelector('.js-plotly-plot');
    if (!text || !gd || !gd._fullLayout) continue;
    const plots = Object.values(gd._fullLayout._plots);
    if (new Set(plots.map(p => Math.round(p.yaxis._offset))).size > 1) continue;
    const cols = [...text.querySelectorAll(':scope > [data-testid=stColumn]')];
    if (cols.length !== plots.length) { out.push({name, columns: cols.length, panels: plots.length}); continue; }
    const was = box.scrollLeft;
    for (const end of [0, box.scrollWidth]) {
      box.scrollLeft = end;
      const left = gd.querySelector('.main-svg').getBoundingClientRect().left;
      const spans = plots.map(p => [left + p.xaxis._offset, left + p.xaxis._offset + p.xaxis._length])
        .sort((a, b) => a[0] - b[0]);
      cols.forEach((c, i) => {
        const r = c.getBoundingClientRect(), mid = Math.round((r.left + r.right) / 2);
        if (mid < spans[i][0] || mid > spans[i][1]) out.push({name, scrolled: box.scrollLeft, column: i, mid,
          panel: spans[i].map(Math.round)});
      });
    }
    box.scrollLeft = was;
  }
  return out;
}"""
# A phone's maps as wide as they are drawn: each heatmap of four keys or more at least 45% of its figure's width (the
# column's 358 px). The date model's three maps on Compare were 126 px, BERT's rollout pair 138: their rows' labels
# were measured escaped ("&lt;/s&gt;") and the colour bar stood down the side.
THIN_JS = r"""() => {
  const out = [];
  for (const gd of document.querySelectorAll('[data-testid=stMain] .js-plotly-plot')) {
    const fig = gd.getBoundingClientRect(), data = gd._fullData || [];
    const maps = data.filter(t => t.type === 'heatmap');
    // each image's own trace, from its trace group's data (plotly binds the trace's calcdata there): images are drawn
    // subplot by subplot, so with two subplots the i-th image is not the i-th heatmap (a long text's exact window:
    // its 18 px column of the share outside was read as the map's grey "masked" trace, a thin strip)
    gd.querySelectorAll('.heatmaplayer .hm image').forEach((img, i) => {
      const bound = img.closest('.hm').__data__;
      const w = img.getBoundingClientRect().width, t = (bound && bound[0] && bound[0].trace) || maps[i] || {};
      if (((t.z || [])[0] || []).length >= 4 && w > 0 && w < 0.45 * fig.width)
        out.push(`${(t.name || '').slice(0, 30)}: ${Math.round(w)} px of the figure's ${Math.round(fig.width)}`);
    });
  }
  return out;
}"""
PHONE = {"width": 390, "height": 844}
# A laptop's browser window not at full width (less than half a 1920 px screen), its sidebar open: the main column is
# 440 px, about half the 820 px a figure is laid out for. Positions' three learned maps had their titles cut at both
# ends at 1,000 px, and SmolLM2's row labels fell on BERT's map beside them on Self vs masked vs cross; at 900 px the
# Masks page's maps stood 60 px wide under cut titles, Knock out's two grids cut their layer names and the grids of
# words ran out of their cells (every "animal" of the pronoun lesson), which 1,000 px had held (2026-11-30).
NARROW = {"width": 900, "height": 800}
PHONE_AGENT = (  # an Android phone's Chrome: "Mobile" in it is what the server takes for a phone
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Mobile Safari/537.36"
)
# every chart in the main area as wide as its element again, after the viewport changed (plotly redraws on resize)
RESIZED_JS = """() => [...document.querySelectorAll('[data-testid=stMain] .js-plotly-plot')].every(gd => {
  const svg = gd.querySelector('.main-svg'), el = gd.closest('[data-testid=stPlotlyChart]');
  return svg && el && Math.abs(svg.getBoundingClientRect().width - el.getBoundingClientRect().width) < 2;
})"""


MAIN_CHARTS = "[data-testid=stMain] [data-testid=stPlotlyChart]"  # a chart's element, there before plotly draws it
# Pages whose maps follow a click: the clicks in order (a button's name, the start of it, or "guess": the first answer
# of a radio) and the key of the chart they draw (Streamlit's st-key- class, dots as dashes). A page that draws no map
# for a model (an encoder on a decoder's page) shows its message instead.
READABLE_CLICKS = {
    "generate": (("Write",), "gen-steps"),
    "pronouns": (("guess", "Reveal"), "pr-grid"),
    "induction": (("guess", "Reveal"), "ind-grid"),
    "knockout": (("Knock out each of",), "ko-importance"),
    "corpora": ((), None),
    "classroom": (("Start a class",), None),
}
MAPLESS = {("default", "induction"), ("default", "knockout"), ("smollm2", "classroom"), ("default", "classroom")}


MAPS_JS = """() => [...document.querySelectorAll('[data-testid=stMain] .js-plotly-plot')]
  .filter(p => (p._fullData || []).some(t => t.type === 'heatmap')).length"""
FAILED = "[data-testid=stException], [data-testid=stAlertContentError]"  # a traceback or an error on the page
# a heatmap drawn, or the page failed (then the visit's assertions say so at once, not after the wait's timeout)
HEATMAP_JS = f"() => ({MAPS_JS})() > 0 || !!document.querySelector('{FAILED}')"


# No run in progress and no element left over from the run before (Streamlit marks an element stale until this run
# draws it again, and removes what it did not draw when the run ends).
FRESH_JS = "() => !document.querySelector('[data-testid=stStatusWidget], [data-testid=stMain] [data-stale=true]')"


def converted_first(query: str) -> None:
    """Convert a bundled GGUF model a page's query names (`model=gemma3`), or wait for the process converting it
    (bundles' lock), before a visit waits for the page's first map: the conversion is done once a machine (about 20 s
    alone for Gemma 3; engines/test_gemma3.py tests it), and inside a busy suite's visit it ran past the 90 s that wait
    gives a page to draw."""
    from attnviz.engines import bundles

    for name, bundle in bundles.BUNDLES.items():
        if f"model={name}" in query:
            bundle.converted()


def _sockets(pg) -> list:
    """The page's websockets as it opens them (Streamlit's session is one; a reconnect opens another): call before
    the page's goto."""
    opened: list = []
    pg.on("websocket", lambda ws: opened.append(ws))
    return opened


def _press(target, sockets: list) -> None:
    """Click, and return once the server has answered it: a message from the server after the click (the run the
    click started), not a fixed wait. Without a websocket seen, the click alone."""
    if not sockets:
        target.click()
        return
    with sockets[-1].expect_event("framereceived", timeout=60_000):
        target.click()


def _draw(pg, clicks: tuple, drawn: str | None, maps: bool, sockets: list | None = None) -> None:
    """Wait until the page has drawn, pressing `clicks` first (with `drawn`, until the chart of that key has drawn).

    What a click draws is waited for by its key, not by counting maps: the page's own maps may not have drawn when the
    count before the click is taken (the status widget is gone before the last elements are in the page), and a
    grid another visit computed is shown at once, with no button (the server keeps it for every session)."""
    if maps and not clicks:
        pg.wait_for_function(HEATMAP_JS, timeout=90_000)
    else:
        pg.wait_for_selector("[data-testid=stMain] h2", timeout=90_000)  # the page's header: its run began
        pg.wait_for_function(SETTLED_JS, polling=250, timeout=300_000)
    main = pg.locator("[data-testid=stMain]")
    done = pg.locator(f"[data-testid=stMain] .st-key-{drawn} .js-plotly-plot") if maps and drawn else None
    for click in clicks:
        if click == "guess":
            target = main.locator("[data-testid=stRadio]").filter(has_text="Your guess").locator("label").nth(1)
        else:
            target = main.get_by_role("button", name=click).first
        if done is not None:  # the click's target, or what it draws already there
            target.or_(done).first.wait_for(timeout=120_000)
            if done.count():
                break
        else:
            pg.wait_for_function(IDLE_JS, timeout=120_000)
            if target.count() == 0:
                continue  # an encoder on a decoder's page: its message, no button
        _press(target, sockets or [])  # label 0 of a guess is the question's own
    if done is not None:
        done.first.wait_for(timeout=300_000)
    pg.wait_for_function(IDLE_JS, timeout=300_000)
    if maps:
        pg.wait_for_function(HEATMAP_JS, timeout=90_000)
    pg.wait_for_function(SETTLED_JS, polling=250, timeout=120_000)  # the page's later charts


def _seen(pg, where: tuple) -> dict:
    """READABLE_JS and VISIBLE_JS of the drawn page; every visit is also a page opened in Chromium: no traceback, no
    error (the third model, SmolLM2 on the scratch backend, where these visits do not go, runs every page in
    tests/test_app.py's AppTest, test_every_page_runs_with_smollm2)."""
    failed = pg.locator(FAILED).all_inner_texts()
    assert failed == [], (*where, failed)
    return {
        **pg.evaluate(READABLE_JS),
        "visible": pg.evaluate(VISIBLE_JS),
        "cells": pg.evaluate(CELLS_JS),
        "apart": pg.evaluate(NAMES_JS),
        "hints": pg.evaluate(HINT_JS),
        "widgets": pg.evaluate(WIDGETS_JS),
    }


def _readable(
    browser,
    server,
    path: str,
    model: str,
    clicks: tuple = (),
    drawn: str | None = None,
    maps: bool = True,
) -> tuple[dict, dict]:
    """(plain, projector): the page's READABLE_JS and VISIBLE_JS once it has drawn after `clicks`, at 1280x800, with
    VISIBLE_JS of the same page opened by a phone (_phone_visible) and narrowed to 900 px (NARROW); then at 1920x1080
    with Projector mode switched on in the sidebar, as a teacher does at the front of the room (the page runs again,
    draws every chart anew, and the clicks are pressed again where what they drew is gone): the laptop and the projector
    are one page, not two (a fresh page spent about 4 s of Chromium's time loading Streamlit before the app drew
    anything)."""
    pg = browser.new_page(viewport={"width": 1280, "height": 800})
    sockets = _sockets(pg)
    try:
        pg.goto(f"{server}/{path}{'&' if '?' in path else '?'}{model}")
        _draw(pg, clicks, drawn, maps, sockets)
        plain = _seen(pg, (path, model, "plain"))
        url = f"{server}/{path}{'&' if '?' in path else '?'}{model}"
        plain["phone"] = _phone_visible(browser, url, clicks, drawn, maps)
        pg.set_viewport_size(NARROW)  # a laptop's window not at full width: its figures squeezed, or scrolled
        pg.wait_for_function(RESIZED_JS, polling=250, timeout=30_000)
        plain["narrow"] = [*pg.evaluate(VISIBLE_JS), *pg.evaluate(UNDER_JS), *pg.evaluate(CELLS_JS)["over"]]
        plain["narrow"] += pg.evaluate(HINT_JS) + pg.evaluate(WIDGETS_JS)
        # and a label a line of its own there too: Generate's maps, squeezed to 440 px, gave 44 keys 4 px each
        plain["narrow"] += pg.evaluate(READABLE_JS)["crowded"]
        pg.set_viewport_size({"width": 1920, "height": 1080})
        pg.wait_for_function(RESIZED_JS, polling=250, timeout=30_000)
        pg.locator("[data-testid=stSidebar]").get_by_text("Projector mode", exact=True).click()
        pg.wait_for_function("() => new URL(location.href).searchParams.get('projector') === 'true'", timeout=60_000)
        pg.wait_for_function(FRESH_JS, polling=250, timeout=300_000)
        _draw(pg, clicks, drawn, maps, sockets)
        return plain, _seen(pg, (path, model, "projector"))
    finally:
        pg.close()


def _phone_visible(browser, url: str, clicks: tuple, drawn: str | None, maps: bool) -> list:
    """VISIBLE_JS and READABLE_JS's crowded axes of the page as a phone opens it: 390x844, a phone's User-Agent (the
    server lays a phone's grids out one map a row by it: figures' Style.phone), touch; what the page's clicks draw
    drawn again there. A desktop's page narrowed to a phone's width is not this: its grids keep the desktop's columns,
    and a map's row labels fall on the map to its left (found when VISIBLE_JS first read every map's labels, not the
    first map's alone). A head grid's words stay in their cells and stand from their colour, as CELLS_JS says of a
    laptop's."""
    pg = browser.shared_page(viewport=PHONE, user_agent=PHONE_AGENT, is_mobile=True, has_touch=True)
    try:
        sockets = _sockets(pg)
        pg.goto(url)
        _draw(pg, clicks, drawn, maps, sockets)
        cells = pg.evaluate(CELLS_JS)  # a head grid's words in its cells: a phone's 12 heads ran them together
        crowded, thin, apart = pg.evaluate(READABLE_JS)["crowded"], pg.evaluate(THIN_JS), pg.evaluate(NAMES_JS)
        said = pg.evaluate(WIDGETS_JS)  # a phone's boxes the narrowest
        return pg.evaluate(VISIBLE_JS) + crowded + cells["over"] + cells["faint"] + apart + thin + said
    finally:
        pg.close()


def _check_readable(path: str, plain: dict, big: dict, maps: bool) -> None:
    """Every heatmap figure has a colour bar, every token axis of up to 64 tokens a label for each with room for it (no
    two run together), no label is clipped, every chart's labels and titles are visible where a person looks (1280x800,
    a 900x800 window, a projector's 1920x1080, a 390x844 phone), the projector's tick labels are at least 1.5x, and the
    words a heatmap writes in its cells stay in their cells (1280x800, 900x800, projector), stand from their cell's
    colour by 4.5:1 or more (WCAG's least for small text), and are 16 px or more on a projector; every map's names
    stand next to its cells (NAMES_JS; a phone's too); a phone's maps are not thin strips (THIN_JS); every select's
    choice is read whole and no word of a widget's label is broken in two (WIDGETS_JS: at all four sizes)."""
    assert plain["phone"] == [], (path, "phone", plain["phone"])
    assert plain["narrow"] == [], (path, "narrow", plain["narrow"])
    for mode, got in (("plain", plain), ("projector", big)):
        assert got["visible"] == [], (path, mode, got["visible"])
        assert all(got["bars"]) and (bool(got["bars"]) or not maps), (path, mode, got["bars"])
        assert got["unlabelled"] == [], (path, mode, got["unlabelled"])
        assert got["clipped"] == [], (path, mode, got["clipped"])
        assert got["crowded"] == [], (path, mode, got["crowded"])
    for mode, got in (("plain", plain), ("projector", big)):  # a cell's words stay in their cell
        assert got["cells"]["over"] == [], (path, mode, got["cells"]["over"])
        assert got["apart"] == [], (path, mode, got["apart"])
        assert got["hints"] == [], (path, mode, got["hints"])
        assert got["widgets"] == [], (path, mode, got["widgets"])
        assert got["cells"]["faint"] == [], (path, mode, got["cells"]["faint"][:6], len(got["cells"]["faint"]))
    assert min(big["cells"]["sizes"], default=16) >= 16, (path, "projector", sorted(set(big["cells"]["sizes"])))
    if maps and big["tickFonts"]:  # a projector's Layer grid alone labels no token (see READABLE_JS's oneScreen)
        assert min(big["tickFonts"]) >= 1.5 * max(plain["tickFonts"]) - 0.01, (
            path,
            plain["tickFonts"],
            big["tickFonts"],
        )


# A class in Chromium (test_browser_class.py, test_browser_class_replicas.py): a teacher's page and three students'.


def _bars(pg) -> list[dict]:
    """The poll's results chart's traces, as plotly holds them: [{x, y}]. Found by its key (classroom.results draws
    it as class.results.<poll>; Streamlit's st-key- class), not as the first chart seen: the head's map is drawn
    below it, and a page under load once had only that one drawn when the first visible chart was read."""
    chart = "[data-testid=stMain] [class*=st-key-class-results-] .js-plotly-plot"
    try:
        pg.locator(chart).filter(visible=True).first.wait_for(timeout=30_000)
    except Exception as e:  # a full suite once saw "The model:" but no chart in 30 s (2026-11-29): what was there
        wire = "\n".join(_WIRES[pg].lines(150)) if pg in _WIRES else "(not recorded)"
        raise AssertionError(
            f"the poll's results chart never drew: {pg.evaluate(RESULTS_JS)}\nthe page: {pg.evaluate(PAGE_JS)}"
            f"\nits last messages:\n{wire}"
        ) from e
    pg.wait_for_function(SETTLED_JS, polling=250, timeout=30_000)
    return pg.evaluate(
        f"() => [...document.querySelectorAll('{chart}')].find(p => p.offsetParent !== null)"
        ".data.map(t => ({x: t.x, y: t.y}))"
    )


_WIRES: dict = {}  # {a page (each student's, each teacher's): its websocket messages}

# the results chart's element, as the page holds it: its container, whether plotly drew in it, its box and styles
RESULTS_JS = """() => [...document.querySelectorAll('[class*=st-key-class-results-]')].map(c => {
  const p = c.querySelector('.js-plotly-plot'), r = c.getBoundingClientRect(), s = getComputedStyle(c);
  return {cls: c.className.slice(0, 120), plot: !!p, drawn: !!(p && p._fullLayout), box: [r.width, r.height],
          display: s.display, visibility: s.visibility, stale: !!c.closest('[data-stale=true]'),
          html: c.innerHTML.slice(0, 300)};
})"""


def _teacher(browser):
    """The teacher's page (1400x1400), its websocket messages recorded for a failure's message."""
    pg = browser.new_page(viewport={"width": 1400, "height": 1400})
    _WIRES[pg] = Wire(pg)
    return pg


def _students(browser, base: str, code: str, n: int = 3) -> list:
    """n students open the student link on `base` and wait for the class panel."""
    students = []
    for _ in range(n):
        pg = browser.new_page(viewport={"width": 1200, "height": 1000})
        _WIRES[pg] = Wire(pg)  # what the page and its server said, for a failure's message
        pg.goto(f"{base}/?class={code}")
        pg.get_by_text("Follow the teacher").wait_for(timeout=60_000)
        students.append(pg)
    return students


def _teacher_shows_a_head(
    teacher, base: str, code: str, secret: str, students: list, layer: int, head: int, logs: tuple = ()
):
    """The teacher opens one head's view through the URL's own state; every student takes it. Returns the waits.
    A student who never takes it fails with the teacher's page and messages too, and the tails of the servers'
    `logs`: a full suite saw a student on two servers draw a view of the Heads page with an empty text and no head
    (2026-12-01), which no step of the test asks for."""
    teacher.goto(f"{base}/?class={code}&teacher={secret}&view=Head&layer={layer}&head={head}")
    teacher.locator("[data-testid=stMain] .js-plotly-plot").first.wait_for(timeout=60_000)
    try:
        waits = [_wait_for_view(s, ("view=Head", f"layer={layer}", f"head={head}")) for s in students]
    except AssertionError as e:
        wire = "\n".join(_WIRES[teacher].lines(150)) if teacher in _WIRES else "(not recorded)"
        tails = "\n".join(f"{path}:\n{_tail(path)}" for path in logs)
        seen = teacher.evaluate(PAGE_JS)
        raise AssertionError(f"{e}\nthe teacher's page: {seen}\nits messages:\n{wire}\n{tails}") from None
    for s in students:
        _shows(s, s.get_by_text(f"Layer {layer}, head {head}").first, 5_000, f"layer {layer}, head {head}")
    return waits


def _tail(path, chars: int = 3000) -> str:
    """The end of a server's log (a failure's message)."""
    try:
        return open(path, errors="replace").read()[-chars:]
    except OSError as err:
        return f"(unread: {err})"


def _ask(teacher, base: str, code: str, secret: str, layer: int):
    """The teacher goes to the Class page (the students follow) and asks what kind of head this is; its main area."""
    teacher.goto(f"{base}/classroom?class={code}&teacher={secret}")
    main = teacher.locator("[data-testid=stMain]")
    main.get_by_text(f"Ask the class about layer {layer}").wait_for(timeout=60_000)
    main.locator("[data-testid=stRadio]").filter(has_text="Question").get_by_text("What kind of head?").click()
    main.get_by_role("button", name="Ask").click()
    main.get_by_text("answered 0 of 3 following when it was asked").wait_for(timeout=10_000)
    return main


def _reveal(teacher, main) -> dict:
    """The teacher reveals; the class's bars, which must count two "broad" and one "self"."""
    main.get_by_role("button", name="Reveal").click()
    main.get_by_text("The model:").wait_for(timeout=30_000)
    bars = dict(zip(*_bars(teacher)[0].values(), strict=True))
    assert bars["broad"] == 2 and bars["self"] == 1 and sum(bars.values()) == 3
    return bars


def _shows(pg, locator, timeout: float, what: str) -> None:
    """Wait for a page to show `locator`; else fail with what the page shows instead (its URL, whether a run is on,
    its text) and its last websocket messages (harness/wire.py): a full suite has seen a student's page take the
    teacher's view into its address and never draw it (two servers and PostgreSQL, 2026-11-28, twice), and a lesson
    page never say "Measured just now" after its Measure button was pressed (2026-12-01, once)."""
    try:
        locator.wait_for(timeout=timeout)
    except Exception as e:
        wire = "\n".join(_WIRES[pg].lines(150)) if pg in _WIRES else "(not recorded)"
        seen = pg.evaluate(PAGE_JS)
        raise AssertionError(f"{what} never reached the page: {seen}\nits last messages:\n{wire}") from e


PAGE_JS = """() => ({href: location.href, running: !!document.querySelector('[data-testid=stStatusWidget]'),
  stale: document.querySelectorAll('[data-testid=stMain] [data-stale=true]').length,
  main: (document.querySelector('[data-testid=stMain]') || {innerText: 'no main area'}).innerText.slice(0, 400),
  end: (document.querySelector('[data-testid=stMain]') || {innerText: ''}).innerText.slice(-600),
  sidebar: (document.querySelector('[data-testid=stSidebar]') || {innerText: ''}).innerText.slice(-300)})"""


def _answer(pg, choice: str, timeout: float = 15_000) -> None:
    """A student picks an answer to the poll on their page and sends it; returns once the page says it was kept
    (a page that never shows the poll fails as `_shows` says)."""
    answer = pg.locator("[data-testid=stMain] [data-testid=stRadio]").filter(has_text="Your answer")
    _shows(pg, answer, timeout, "the poll")
    answer.get_by_text(choice, exact=True).click()
    pg.locator("[data-testid=stMain]").get_by_role("button", name="Send").click()
    pg.get_by_text("Waiting for the teacher to reveal").wait_for(timeout=15_000)
