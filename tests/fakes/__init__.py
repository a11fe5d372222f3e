"""Fakes the tests share, at the boundaries where nothing real runs here (a platform client's clock and HTTP)."""
