"""Grafana: the four kubejoule dashboards (dashboards/, written by builder/) and provisioning files."""
