"""What every rank runs: world, threads, supervision, device, meter, progress, data and batching."""
