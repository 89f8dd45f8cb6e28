"""``hvdscale fusion``: Horovod's fusion threshold, cycle time and overlap mode, and DDP's bucket
size, swept in paired rounds and recommended over the defaults."""
