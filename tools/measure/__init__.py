"""Measuring tools for the house's shape (issue 34). Tooling, not product code."""
