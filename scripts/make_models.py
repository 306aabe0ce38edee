#!/usr/bin/python3
"""Generates the TorchScript models Packrat's demo, tests and benchmarks serve.

Run with Debian's interpreter (/usr/bin/python3, which has python3-torch and
python3-torchvision). Weights are random but seeded, so every machine gets the same files.
Nothing generated here is committed: `scripts/setup.sh` calls this.

    /usr/bin/python3 scripts/make_models.py --out models [--bench]
"""
import argparse
import os

import torch
import torch.nn as nn


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


def staged_cnn():
    """A small staged classifier (3x64x64 -> 10, four stages, a few ms per image) for the
    layered-batching tests: big enough that rows arrive while a batch runs."""
    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                             nn.Conv2d(cout, cout, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
    return Staged([block(3, 32), block(32, 64), block(64, 128),
                   nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(1), nn.Linear(128, 10))])


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


def save(module, example, path):
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
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)

    import torchvision  # noqa: E402  (slow import: only when needed)

    jobs = [
        ("tiny_mlp.pt", TinyMlp(), (torch.randn(2, 16),)),
        ("two_head.pt", TwoHead(), (torch.randn(2, 8), torch.randint(0, 100, (2, 4)))),
        ("small_cnn.pt", SmallCnn(), (torch.randn(2, 3, 32, 32),)),
        ("resnet18.pt", torchvision.models.resnet18(), (torch.randn(1, 3, 224, 224),)),
        # a small transformer encoder (2 layers, hidden 96) for the kernel-optimisation tests
        ("tiny_bert.pt", BertLike(layers=2, vocab=1000, seq=16, hidden=96),
         (torch.randint(0, 100, (2, 16)),)),
        ("staged_cnn.pt", staged_cnn(), (torch.randn(2, 3, 64, 64),)),
    ]
    if args.bench:
        jobs.append(("resnet50.pt", torchvision.models.resnet50(), (torch.randn(1, 3, 224, 224),)))
        jobs.append(("resnet50_staged.pt", staged_resnet(torchvision.models.resnet50()),
                     (torch.randn(1, 3, 224, 224),)))
        # 4 of BERT-base's 12 layers at sequence 128: the same kernels and shapes per layer, a
        # third of the time, so a 2-core machine can profile it in minutes.
        jobs.append(("bert_like.pt", BertLike(layers=4), (torch.randint(0, 30522, (2, 128)),)))
    for name, module, example in jobs:
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
