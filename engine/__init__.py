"""Pure rules engines for cardrules: no I/O, no clock, no global randomness."""
