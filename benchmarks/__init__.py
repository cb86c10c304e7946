"""Side-by-side benchmarks of the pipeline against its peers and the hardware (`make bench`)."""
