"""A character-level language model trained with truncated backpropagation through
time, in the style of pytorch/examples word_language_model: Embedding, a recurrent
core (nn.LSTM / nn.GRU, or an nn.RNNCell / nn.LSTMCell loop), tied decoder, hidden
state detached between chunks, clip_grad_norm_, SGD with manual lr decay, and
sampling with torch.multinomial. Prints its losses."""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

TEXT = ("the quick brown fox jumps over the lazy dog. a stitch in time saves nine. "
        "all that glitters is not gold. the early bird catches the worm. ") * 4


class CharLM(nn.Module):
    def __init__(self, vocab, cell, emb=24, hidden=24, layers=2):
        super().__init__()
        self.cell_kind, self.layers, self.hidden = cell, layers, hidden
        self.drop = nn.Dropout(0.1)
        self.encoder = nn.Embedding(vocab, emb)
        if cell == "lstm":
            self.rnn = nn.LSTM(emb, hidden, layers, dropout=0.1)
        elif cell == "gru":
            self.rnn = nn.GRU(emb, hidden, layers, dropout=0.1)
        elif cell == "rnncell":
            self.cells = nn.ModuleList([nn.RNNCell(emb if i == 0 else hidden, hidden,
                                                   nonlinearity="tanh")
                                        for i in range(layers)])
        else:
            self.cells = nn.ModuleList([nn.LSTMCell(emb if i == 0 else hidden, hidden)
                                        for i in range(layers)])
        self.decoder = nn.Linear(hidden, vocab)
        self.decoder.weight = self.encoder.weight  # weight tying (emb == hidden)
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)

    def init_hidden(self, bsz):
        z = torch.zeros(self.layers, bsz, self.hidden)
        if self.cell_kind in ("lstm", "lstmcell"):
            return (z, z.clone())
        return z

    def forward(self, x, hidden):
        emb = self.drop(self.encoder(x))
        if self.cell_kind in ("lstm", "gru"):
            out, hidden = self.rnn(emb, hidden)
        elif self.cell_kind == "rnncell":
            hs = list(hidden.unbind(0))
            outs = []
            for t in range(emb.size(0)):
                inp = emb[t]
                for i, cell in enumerate(self.cells):
                    hs[i] = cell(inp, hs[i])
                    inp = hs[i]
                outs.append(inp)
            out, hidden = torch.stack(outs), torch.stack(hs)
        else:
            h, c = [list(s.unbind(0)) for s in hidden]
            outs = []
            for t in range(emb.size(0)):
                inp = emb[t]
                for i, cell in enumerate(self.cells):
                    h[i], c[i] = cell(inp, (h[i], c[i]))
                    inp = h[i]
                outs.append(inp)
            out, hidden = torch.stack(outs), (torch.stack(h), torch.stack(c))
        return self.decoder(self.drop(out)), hidden


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    return data[:nbatch * bsz].view(bsz, -1).t().contiguous()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cell", default="lstm", choices=["lstm", "gru", "rnncell", "lstmcell"])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--bptt", type=int, default=10)
    p.add_argument("--lr", type=float, default=2.0)
    args = p.parse_args()
    torch.manual_seed(1111)
    chars = sorted(set(TEXT))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in TEXT], dtype=torch.long)
    train = batchify(data, 8)
    model = CharLM(len(chars), args.cell)
    criterion = nn.CrossEntropyLoss()
    lr = args.lr
    step = 0
    for epoch in range(args.epochs):
        model.train()
        hidden = model.init_hidden(8)
        total = 0.0
        for i in range(0, train.size(0) - 1, args.bptt):
            seq_len = min(args.bptt, train.size(0) - 1 - i)
            x, y = train[i:i + seq_len], train[i + 1:i + 1 + seq_len].reshape(-1)
            hidden = repackage_hidden(hidden)
            model.zero_grad()
            out, hidden = model(x, hidden)
            loss = criterion(out.view(-1, len(chars)), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            for prm in model.parameters():
                prm.data.add_(prm.grad, alpha=-lr)
            total += loss.item()
            if step % 4 == 0:
                print(f"step {step} loss {loss.item():.6f}")
            step += 1
        print(f"epoch {epoch} mean loss {total / math.ceil((train.size(0) - 1) / args.bptt):.6f}"
              f" ppl {math.exp(total / math.ceil((train.size(0) - 1) / args.bptt)):.4f}")
        lr /= 2.0
    model.eval()
    hidden = model.init_hidden(1)
    x = torch.tensor([[stoi["t"]]])
    out_chars = []
    with torch.no_grad():
        for _ in range(30):
            logits, hidden = model(x, hidden)
            probs = F.softmax(logits[-1, 0] / 0.8, dim=-1)
            idx = torch.multinomial(probs, 1)
            out_chars.append(chars[idx.item()])
            x = idx.view(1, 1)
    print("sample", repr("".join(out_chars)))


if __name__ == "__main__":
    main()
