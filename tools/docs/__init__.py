"""The documentation site's generated Reference pages (docs/reference/*.md): `python
tools/docs/reference.py` writes them, `--check` says which is stale. Tooling, not product code."""
