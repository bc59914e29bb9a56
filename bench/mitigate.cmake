# mitigate benchmarks
