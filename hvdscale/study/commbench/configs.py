"""Configs the communication studies share, as ``--set`` overrides of the defaults.

``COMM_HEAVY``: a model whose step is mostly communication (a 40k-word NMT with a small RNN and
tiny batches), the case where the parameter server and allreduce differ most; the ps
communication bench measures on it and the comm-model bench sweeps and predicts it.
"""

COMM_HEAVY = ("model.kind=nmt", "model.src_vocab=40000", "model.tgt_vocab=40000",
              "model.embed_dim=128", "model.hidden_size=128", "data.batch_size=4",
              "data.synthetic.max_len=8", "data.synthetic.mean_len=5",
              "data.synthetic.sentences_per_rank=64", "optim.name=sgd")
