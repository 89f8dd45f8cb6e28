"""Study tools: they launch runs and read their records (sweep and its launcher, report with its
points, tables and plots, breakdown, predict, fusion, commbench, gemm, profile, batch, hostfile);
nothing here runs inside a rank's step."""
