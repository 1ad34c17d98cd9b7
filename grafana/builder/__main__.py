"""`python -m grafana.builder`: writes the dashboards to grafana/dashboards/ and the chart's copy."""

from __future__ import annotations

import sys

from . import CHART_DASHBOARD_DIR, DASHBOARD_DIR, files


def main() -> int:
    texts = files()
    for directory in (DASHBOARD_DIR, CHART_DASHBOARD_DIR):
        directory.mkdir(parents=True, exist_ok=True)
        for name, text in texts.items():
            (directory / name).write_bytes(text.encode())
            print(f"wrote {directory / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
