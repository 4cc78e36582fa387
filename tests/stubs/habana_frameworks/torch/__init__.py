"""Stand-in for ``habana_frameworks.torch`` (tests only). Not Gaudi."""
