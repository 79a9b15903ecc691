"""Benchmarks of bertviz_app against peers measured in the same run (``python -m bench [--quick]``)."""
