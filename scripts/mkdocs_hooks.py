"""MkDocs hooks: fill each page's generated blocks while the site builds.

A page holds ``<!-- generated: NAME -->`` ... ``<!-- end -->``; scripts/docs.py makes the
text from the registries, train.py's flag definitions and docs/results/*.json, so the
site never shows a stale table and no generated page is committed.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/, for docs.py

import docs  # noqa: E402

MAKERS = docs.generators()


def on_page_markdown(markdown, page, config, files):
    return docs.fill_blocks(markdown, MAKERS)
