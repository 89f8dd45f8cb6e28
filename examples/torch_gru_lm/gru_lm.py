"""A PyTorch GRU language model for hvdscale (model.kind: custom).

The whole contract: ``build(sizes, rnn_impl)`` returns an ``nn.Module`` whose forward takes the
batch's padded arrays and returns (summed token loss, token count). hvdscale does the rest.
"""

from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

EMBEDDINGS = {"embed.weight": "src"}  # this table's rows are the ids in batch.src


class GRULM(nn.Module):
    def __init__(self, vocab: int, embed_dim: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, embed_dim, padding_idx=0)
        self.rnn = nn.GRU(embed_dim, hidden, layers, batch_first=True)
        self.proj = nn.Linear(hidden, vocab)

    def forward(self, src, src_len, tgt_in, tgt_out, tgt_len):
        # tgt_in is None for a language model; padding (id 0) is left out of the loss.
        packed = pack_padded_sequence(self.embed(src), src_len.cpu(), batch_first=True,
                                      enforce_sorted=False)
        out, _ = self.rnn(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        logits = self.proj(out)
        loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=0,
                               reduction="sum")
        return loss, tgt_len.sum()


def build(sizes, rnn_impl):
    return GRULM(sizes.src_vocab, sizes.embed_dim, sizes.hidden_size, sizes.encoder_layers)
