# analysis benchmarks
