"""Did a strategy reach its quality target, and how fast: time to quality and the learning-rate
rules compared."""
