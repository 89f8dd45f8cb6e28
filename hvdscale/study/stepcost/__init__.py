"""Where a step's time goes on one device: GEMM curves and their findings, the profiled kernels,
the useful FLOPs, the GPU limit and the per-rank batch question."""
