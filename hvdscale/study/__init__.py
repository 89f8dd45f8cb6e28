"""Study tools: they launch runs and read their records, one room per question: sweep/ (and its
launcher), report/, predict/, fusion/, commbench/, stepcost/ (GEMM, profile, FLOPs, GPU limit,
batch), quality/ (time to quality, LR rules), paired/ (rounds and recommendations); plotting.py is
the one way they all draw. Nothing here runs inside a rank's step."""
