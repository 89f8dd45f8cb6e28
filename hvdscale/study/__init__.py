"""Study tools: they launch runs and read their records (sweep, report, breakdown, predict,
fusion, commbench, gemm, profile, batch, hostfile); nothing here runs inside a rank's step."""
