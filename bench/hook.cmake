# hook benchmarks
