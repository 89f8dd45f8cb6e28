"""What every rank runs: world, threads, supervision, device, meter, progress and batching (the
data itself: hvdscale.corpora)."""
