"""The README's tables of measured figures are what their commands give: recomputed here and compared."""

import subprocess
import sys

from conftest import ROOT


def test_the_pronoun_table_in_the_readme_is_what_bench_pronoun_table_computes():
    run = subprocess.run([sys.executable, str(ROOT / "bench/pronoun_table.py"), "--check"], capture_output=True,
                         text=True, timeout=600, cwd=ROOT)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "matches" in run.stdout


def test_the_check_fails_on_a_stale_figure():
    sys.path.insert(0, str(ROOT / "bench"))
    import pronoun_table

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    header, rows = pronoun_table.readme_rows(readme)
    assert header.startswith("| set | method |") and len([r for r in rows if r.startswith("| our 22")]) == 2
    assert pronoun_table.differences(readme, header, rows) == []
    stale = readme.replace(rows[-1], rows[-1].replace("%", "1%", 1))  # one figure off
    assert pronoun_table.differences(stale, header, rows) == [rows[-1]]
