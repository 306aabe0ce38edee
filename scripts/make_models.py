#!/usr/bin/python3
"""Generates the TorchScript models Packrat's demo, tests and benchmarks serve.

Run with Debian's interpreter (/usr/bin/python3, which has python3-torch and
python3-torchvision). Weights are random but seeded, so every machine gets the same files.
Nothing generated here is committed: `scripts/setup.sh` calls this.

    /usr/bin/python3 scripts/make_models.py --out models [--bench]
"""
import argparse
import math
import os
from typing import List

import torch
import torch.nn as nn


class ImageProbe(nn.Module):
    """One 3x224x224 image (602 KB) in, 8 values out, next to no compute: what moving an image
    through the agent costs (bench/shared_memory.py)."""

    def forward(self, x):
        return x[:, 0, 0, :8] * 2.0


class TinyMlp(nn.Module):
    """16 -> 32 -> 8: the tiny model for overhead and throughput measurements."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class TwoHead(nn.Module):
    """Two inputs (FP32 features, INT64 ids) and two outputs (FP32 scores, INT64 argmax):
    exercises multi-tensor requests and non-float datatypes end to end."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 8)
        self.fc = nn.Linear(8 + 8, 5)

    def forward(self, x, ids):
        h = torch.cat([x, self.emb(ids).mean(dim=1)], dim=1)
        scores = self.fc(h)
        return scores, scores.argmax(dim=1)


class SmallCnn(nn.Module):
    """A small image classifier (3x32x32 -> 10) for tests of image-shaped tensors."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
            nn.Flatten(), nn.Linear(32, 10))

    def forward(self, x):
        return self.body(x)


class BertLike(nn.Module):
    """A BERT-base-shaped encoder (hidden 768, 12 heads, FFN 3072) with `layers` layers over
    token ids [B, seq] -> the first token's hidden state [B, 768]. Random weights."""

    def __init__(self, layers=12, vocab=30522, seq=128, hidden=768):
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden)
        self.positions = nn.Parameter(torch.randn(1, seq, hidden) * 0.02)
        layer = nn.TransformerEncoderLayer(hidden, 12, 4 * hidden, batch_first=True,
                                           activation="gelu")
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(hidden)

    def forward(self, ids):
        h = self.tokens(ids) + self.positions[:, : ids.shape[1]]
        return self.norm(self.encoder(h))[:, 0]


class Staged(nn.Module):
    """A model split into sequential stages for layered batching: forward() runs the submodules
    of `stages` in order, so the file is an ordinary model too; Packrat's runtime calls
    stages.0, stages.1, ... one by one and lets queued rows join between them."""

    def __init__(self, stages):
        super().__init__()
        self.stages = nn.ModuleList(stages)

    def forward(self, x):
        for stage in self.stages:
            x = stage(x)
        return x


def staged_resnet(resnet):
    """ResNet-18/50 as six stages: the stem, the four residual layers, the head."""
    return Staged([
        nn.Sequential(resnet.conv1, resnet.bn1, resnet.relu, resnet.maxpool),
        resnet.layer1, resnet.layer2, resnet.layer3, resnet.layer4,
        nn.Sequential(resnet.avgpool, nn.Flatten(1), resnet.fc)])


def staged_alexnet(alexnet):
    """AlexNet (the lbci-paper's model) as five stages: three convolution blocks, then the two
    large fully connected layers, whose weights batching shares between images."""
    f, c = alexnet.features, alexnet.classifier
    return Staged([f[0:3], f[3:6], f[6:13],
                   nn.Sequential(alexnet.avgpool, nn.Flatten(1), c[0:3]), c[3:]])


def staged_cnn():
    """A small staged classifier (3x64x64 -> 10, four stages, a few ms per image) for the
    layered-batching tests: big enough that rows arrive while a batch runs."""
    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                             nn.Conv2d(cout, cout, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
    return Staged([block(3, 32), block(32, 64), block(64, 128),
                   nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(1), nn.Linear(128, 10))])


class DecoderBlock(nn.Module):
    """A GPT-2 block (pre-norm attention + MLP) with a key/value cache."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.head_dim = d // heads
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    @torch.jit.export
    def prefill(self, x: torch.Tensor, cache_k: torch.Tensor, cache_v: torch.Tensor):
        """x [L, d]: one prompt. Writes its keys and values into cache_k/v [max_len, H, hd]."""
        n = x.size(0)
        q, k, v = self.qkv(self.ln1(x)).view(n, 3, self.heads, self.head_dim).unbind(1)
        cache_k[:n] = k
        cache_v[:n] = v
        att = torch.einsum("lhd,mhd->hlm", q, k) * self.scale
        causal = torch.ones(n, n, dtype=torch.bool).tril()
        att = torch.softmax(att.masked_fill(~causal, float("-inf")), dim=-1)
        out = torch.einsum("hlm,mhd->lhd", att, v).reshape(n, -1)
        x = x + self.proj(out)
        return x + self.mlp(self.ln2(x))

    @torch.jit.export
    def step(self, x: torch.Tensor, positions: torch.Tensor, cache_k: torch.Tensor,
             cache_v: torch.Tensor, mask: torch.Tensor):
        """x [n, d]: one token per sequence at `positions`; cache_k/v [n, max_len, H, hd] are the
        n sequences' caches (updated in place); mask [n, Lk] says which cached positions each
        sequence attends to."""
        n = x.size(0)
        q, k, v = self.qkv(self.ln1(x)).view(n, 3, self.heads, self.head_dim).unbind(1)
        rows = torch.arange(n)
        cache_k[rows, positions] = k
        cache_v[rows, positions] = v
        lk = mask.size(1)
        att = torch.einsum("nhd,nlhd->nhl", q, cache_k[:, :lk]) * self.scale
        att = torch.softmax(att.masked_fill(~mask.unsqueeze(1), float("-inf")), dim=-1)
        out = torch.einsum("nhl,nlhd->nhd", att, cache_v[:, :lk]).reshape(n, -1)
        x = x + self.proj(out)
        return x + self.mlp(self.ln2(x))


class GptDecoder(nn.Module):
    """A GPT-2-shaped decoder for generation with a key/value cache that the runtime owns:

      config() -> [layers, heads, head_dim, max_len, vocab]
      prefill(ids [L], cache_k, cache_v, slot) -> logits [V] of the last position
      step(tokens [n], positions [n], cache_k, cache_v) -> logits [n, V]
      forward(ids [L]) -> logits [L, V], no cache (a reference)

    The caches are [layers, slots, max_len, heads, head_dim]; step() decodes the sequences in
    slots 0..n-1, one token each. Logits come without the output bias `lm_bias`: the runtime's
    fused kernel adds it (amun-topup-batching-paper §2.2). forward() adds it."""

    def __init__(self, vocab, d, layers, heads, max_len):
        super().__init__()
        self.layers = layers
        self.heads = heads
        self.head_dim = d // heads
        self.max_len = max_len
        self.vocab = vocab
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList([DecoderBlock(d, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_bias = nn.Parameter(torch.randn(vocab) * 0.5)

    @torch.jit.export
    def config(self) -> List[int]:
        return [self.layers, self.heads, self.head_dim, self.max_len, self.vocab]

    @torch.jit.export
    def prefill(self, ids: torch.Tensor, cache_k: torch.Tensor, cache_v: torch.Tensor,
                slot: int) -> torch.Tensor:
        n = ids.size(0)
        x = self.wte(ids) + self.wpe(torch.arange(n))
        i = 0
        for block in self.blocks:
            x = block.prefill(x, cache_k[i, slot], cache_v[i, slot])
            i += 1
        return self.lm_head(self.ln_f(x[n - 1]))

    @torch.jit.export
    def step(self, tokens: torch.Tensor, positions: torch.Tensor, cache_k: torch.Tensor,
             cache_v: torch.Tensor) -> torch.Tensor:
        n = tokens.size(0)
        lk = int(positions.max()) + 1
        mask = torch.arange(lk).unsqueeze(0) <= positions.unsqueeze(1)
        x = self.wte(tokens) + self.wpe(positions)
        i = 0
        for block in self.blocks:
            x = block.step(x, positions, cache_k[i, :n], cache_v[i, :n], mask)
            i += 1
        return self.lm_head(self.ln_f(x))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        cache_k = torch.zeros(self.layers, 1, self.max_len, self.heads, self.head_dim)
        cache_v = torch.zeros_like(cache_k)
        n = ids.size(0)
        x = self.wte(ids) + self.wpe(torch.arange(n))
        i = 0
        for block in self.blocks:
            x = block.prefill(x, cache_k[i, 0], cache_v[i, 0])
            i += 1
        return self.lm_head(self.ln_f(x)) + self.lm_bias


def check_decoder(path):
    """Greedy decoding with the cache (prefill, then steps of two sequences at once) must equal
    recomputing each whole sequence with forward()."""
    m = torch.jit.load(path)
    layers, heads, head_dim, max_len, vocab = m.config()
    cache_k = torch.zeros(layers, 2, max_len, heads, head_dim)
    cache_v = torch.zeros_like(cache_k)
    prompts = [torch.tensor([1, 5, 9]), torch.tensor([7, 3, 3, 8, 2])]
    seqs, tokens = [], []
    with torch.no_grad():
        for slot, p in enumerate(prompts):
            first = int((m.prefill(p, cache_k, cache_v, slot) + m.lm_bias).argmax())
            seqs.append(p.tolist() + [first])
            tokens.append(first)
        for _ in range(6):
            positions = torch.tensor([len(s) - 1 for s in seqs])
            logits = m.step(torch.tensor(tokens), positions, cache_k, cache_v) + m.lm_bias
            tokens = logits.argmax(dim=1).tolist()
            for s, t in zip(seqs, tokens):
                s.append(t)
        for s in seqs:
            ref = m(torch.tensor(s[:-1])).argmax(dim=1).tolist()
            if ref[-7:] != s[-7:]:
                os.remove(path)
                raise SystemExit(f"{path}: cached decoding differs from forward()")


def check_stages(path, row_shape):
    """Running the saved file's stages one by one must equal its forward() (at another batch
    size than the one traced)."""
    loaded = torch.jit.load(path)
    x = torch.randn(3, *row_shape)
    with torch.no_grad():
        whole = loaded(x)
        for stage in loaded.stages.children():
            x = stage(x)
    if not torch.allclose(x, whole, rtol=1e-5, atol=1e-5):
        os.remove(path)
        raise SystemExit(f"{path}: the stages in order differ from the whole model")


def save_scripted(module, path):
    module.eval()
    scripted = torch.jit.script(module)
    scripted.save(path)
    check_decoder(path)
    print(f"wrote {path} ({os.path.getsize(path) / 1e6:.1f} MB)")


def save(module, example, path):
    if example is None:
        return save_scripted(module, path)
    module.eval()
    with torch.no_grad():
        traced = torch.jit.trace(module, example)
    traced.save(path)
    if isinstance(module, Staged):
        check_stages(path, example[0].shape[1:])
    print(f"wrote {path} ({os.path.getsize(path) / 1e6:.1f} MB)")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="models")
    parser.add_argument("--bench", action="store_true", help="also the large benchmark models")
    parser.add_argument("--only", default="",
                        help="comma-separated file names: write only these (e.g. resnet50.pt)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)

    import torchvision  # noqa: E402  (slow import: only when needed)

    jobs = [
        ("tiny_mlp.pt", TinyMlp(), (torch.randn(2, 16),)),
        ("two_head.pt", TwoHead(), (torch.randn(2, 8), torch.randint(0, 100, (2, 4)))),
        ("small_cnn.pt", SmallCnn(), (torch.randn(2, 3, 32, 32),)),
        ("resnet18.pt", torchvision.models.resnet18(), (torch.randn(1, 3, 224, 224),)),
        ("image_probe.pt", ImageProbe(), (torch.randn(2, 3, 224, 224),)),
        # a small transformer encoder (2 layers, hidden 96) for the kernel-optimisation tests
        ("tiny_bert.pt", BertLike(layers=2, vocab=1000, seq=16, hidden=96),
         (torch.randint(0, 100, (2, 16)),)),
        ("staged_cnn.pt", staged_cnn(), (torch.randn(2, 3, 64, 64),)),
        # a tiny GPT-like decoder (vocabulary 512, 2 layers) for the generation tests
        ("tiny_gpt.pt", GptDecoder(vocab=512, d=64, layers=2, heads=4, max_len=128), None),
    ]
    if args.bench:
        jobs.append(("resnet50.pt", torchvision.models.resnet50(), (torch.randn(1, 3, 224, 224),)))
        jobs.append(("resnet50_staged.pt", staged_resnet(torchvision.models.resnet50()),
                     (torch.randn(1, 3, 224, 224),)))
        jobs.append(("alexnet_staged.pt", staged_alexnet(torchvision.models.alexnet()),
                     (torch.randn(1, 3, 224, 224),)))
        jobs.append(("inception_v3.pt",
                     torchvision.models.inception_v3(aux_logits=False, init_weights=True),
                     (torch.randn(1, 3, 299, 299),)))
        # 4 of BERT-base's 12 layers at sequence 128: the same kernels and shapes per layer, a
        # third of the time, so a 2-core machine can profile it in minutes.
        jobs.append(("bert_like.pt", BertLike(layers=4), (torch.randint(0, 30522, (2, 128)),)))
        # GPT-2 small's shape (12 layers, hidden 768, 12 heads, vocabulary 50257), 512 positions
        jobs.append(("gpt2_like.pt", GptDecoder(vocab=50257, d=768, layers=12, heads=12,
                                                max_len=512), None))
    only = set(filter(None, args.only.split(",")))
    unknown = only - {name for name, _, _ in jobs}
    if unknown:
        parser.error(f"unknown models: {', '.join(sorted(unknown))}")
    for name, module, example in jobs:
        if only and name not in only:
            continue
        path = os.path.join(args.out, name)
        if os.path.exists(path):
            print(f"kept {path}")
            continue
        save(module, example, path)
    # A file that is not TorchScript, for the load-failure tests.
    with open(os.path.join(args.out, "not_a_model.pt"), "w") as f:
        f.write("this is not a TorchScript archive\n")


if __name__ == "__main__":
    main()
