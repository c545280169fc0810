"""``python -m benchmarks.sidebyside REF``: the helper processes of the baseline import REF's code.

The side-by-side comparison is the benchmarks' own code (``benchmarks.sidebyside``), not the
package's: there is no public name to test it through, hence the private import.  What is checked
is what would make its report lie: the baseline column measuring this tree, or a worktree left
behind.  The figures themselves are for the command, not for the suite.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from benchmarks.sidebyside import baseline_packages, check_baseline, main

ROOT = Path(__file__).resolve().parents[2]


def _worktrees() -> str:
    return subprocess.run(
        ["git", "worktree", "list"],  # noqa: S607 - git from PATH
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_the_baseline_helpers_import_the_baseline_tree_which_is_removed_after() -> None:
    with baseline_packages("HEAD") as (packages, commit):
        linked = (packages / "asyncsdk").resolve()
        assert linked != (ROOT / "asyncsdk").resolve()
        assert (linked / "__init__.py").is_file()
        check_baseline(packages)  # raises SystemExit if the helper imported this tree
        assert str(linked.parent) in _worktrees()
    assert commit
    assert not packages.exists()
    assert str(linked.parent) not in _worktrees()


def test_a_folder_without_the_packages_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="imported asyncsdk from"):
        check_baseline(tmp_path)  # nothing there: the helper finds this tree's asyncsdk


def test_an_unknown_ref_is_refused_with_gits_reason() -> None:
    with (
        pytest.raises(SystemExit, match="Needed a single revision"),
        baseline_packages("no-such-ref"),
    ):
        pass


def test_only_takes_the_sections_it_knows(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["HEAD", "--only", "client,nope"])
    assert (
        "--only takes some of client,upload,receiver, not 'client,nope'" in capsys.readouterr().err
    )
