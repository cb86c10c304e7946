"""The documentation site builds from the checkout, offline, with MkDocs in strict mode.

`mkdocs build --strict` stops on any warning: a link to a page or an anchor that does
not exist, or one MkDocs cannot resolve (mkdocs.yml's `validation`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

from tpu_pipeline.common.config import REPO_ROOT

README = REPO_ROOT / "README.md"


def _build(root, site):
    """`mkdocs build --strict` of the site whose mkdocs.yml is in `root`."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=root,
        capture_output=True,
        text=True,
        # Material's banner about MkDocs 2.0 is not about this site.
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=120,
    )


def test_the_site_builds_strictly_with_the_generated_reference(tmp_path):
    result = _build(REPO_ROOT, tmp_path / "site")

    assert result.returncode == 0, result.stderr
    configuration = (tmp_path / "site" / "reference" / "configuration" / "index.html").read_text()
    assert "trainer.learning_rate" in configuration
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").exists()
    assert not (tmp_path / "site" / "gen_reference.py").exists()


def test_a_broken_link_fails_the_strict_build(tmp_path):
    shutil.copy(REPO_ROOT / "mkdocs.yml", tmp_path)
    shutil.copytree(REPO_ROOT / "docs", tmp_path / "docs")
    page = tmp_path / "docs" / "getting-started.md"
    page.write_text(page.read_text() + "\n[gone](reports.md#no-such-section)\n")

    result = _build(tmp_path, tmp_path / "site")

    assert result.returncode != 0
    assert "no-such-section" in result.stderr


def test_the_readme_is_the_front_door():
    text = README.read_text()

    assert len(text.splitlines()) <= 250
    # The two commands, as the Makefile and CI (.ci/run) run them.
    assert "make run    # " in text and "make test   # " in text
    assert "make test" in (REPO_ROOT / ".ci" / "run").read_text()
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if "://" not in target:
            assert (REPO_ROOT / target).exists(), f"README links to {target}, which is not there"
