"""What the tests and the benchmarks both start, for real: the app's server (`python -m attnviz serve`), a headless
Chromium's flags, and a PostgreSQL server (pgserver). Not part of the attnviz package; the tests and bench/ import it
from the checkout's root."""
