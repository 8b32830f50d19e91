"""The docs' tables of measured figures are what their commands give: recomputed here and compared; every link in
the README and docs/ leads somewhere."""

import sys

import pytest
from conftest import ROOT


@pytest.mark.slow  # the pronoun table recomputed: WSC273 and our sets on BERT, both methods
def test_the_pronoun_table_in_the_readme_is_what_bench_pronoun_table_computes():
    """What `bench/pronoun_table.py --check` does (its table() and differences()), in this process."""
    sys.path.insert(0, str(ROOT / "bench"))
    import pronoun_table

    header, rows = pronoun_table.table()
    assert (
        rows and pronoun_table.differences((ROOT / "docs/pronouns.md").read_text(encoding="utf-8"), header, rows) == []
    )


def test_the_check_fails_on_a_stale_figure():
    sys.path.insert(0, str(ROOT / "bench"))
    import pronoun_table

    readme = (ROOT / "docs/pronouns.md").read_text(encoding="utf-8")
    header, rows = pronoun_table.readme_rows(readme)
    assert header.startswith("| set | method |") and len([r for r in rows if r.startswith("| our 22")]) == 2
    assert pronoun_table.differences(readme, header, rows) == []
    stale = readme.replace(rows[-1], rows[-1].replace("%", "1%", 1))  # one figure off
    assert pronoun_table.differences(stale, header, rows) == [rows[-1]]


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_the_head_count_table_in_the_readme_is_what_the_shipped_models_score():
    import re

    from attnviz.lessons import head_models

    readme = (ROOT / "docs/cli.md").read_text(encoding="utf-8")
    for task in head_models.TASKS:
        row = next(line for line in readme.splitlines() if line.startswith(f"| {task} ("))
        shown = re.findall(r"(\d+\.\d\d)%", row)[:4]  # 1, 2, 4 and 8 heads
        measured = head_models.held_out_accuracy(task)["models"]
        assert shown == [f"{100 * m['accuracy']:.2f}" for m in measured], (task, row)
        assert f"| {measured[0]['steps']:,} |" in row


def test_every_link_in_the_readme_and_docs_leads_to_a_file_that_exists():
    import re

    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    dead = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if target.startswith(("http://", "https://", "mailto:", "#")):
                continue
            if not (page.parent / target.split("#")[0]).exists():
                dead.append(f"{page.relative_to(ROOT)} -> {target}")
    assert dead == []
    linked = set(re.findall(r"\]\(docs/([\w.]+\.md)\)", (ROOT / "README.md").read_text(encoding="utf-8")))
    assert linked == {p.name for p in pages[1:]}  # every page of docs/ is reachable from the front door


def test_the_readme_is_a_front_door():
    words = len((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert words <= 2500, words
