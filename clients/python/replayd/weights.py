"""A hosted learner's policy weights: the flat "RDNN" format, parsed.

GetWeights returns the policy network (DQN: the Q network, DDPG: the
actor) in the format of common/rd_nn_spec.h, all little-endian::

    u32 magic 0x4E4E4452 ("RDNN"), u32 version = 1, u32 L (1..16)
    u32 sizes[L+1]   input, hidden..., output; each 1..65536
    u32 act[L]       0 identity, 1 relu, 2 tanh (applied to layer l's output)
    f32 ...          for each layer: W [out x in] row-major, then b [out]

:func:`parse` checks it as the C parser does (every malformed buffer is an
error, non-finite weights included) and returns :class:`Weights`: the
layers as numpy arrays with names and shapes, a numpy forward pass, and,
when torch is importable, :meth:`Weights.to_torch` / :meth:`Weights.load_into`.
torch is never imported by the package otherwise.
"""
from dataclasses import dataclass
from typing import Any, List, Tuple

import numpy as np

from .errors import InvalidArgument

__all__ = ["Weights", "parse", "MAGIC", "ACTIVATIONS"]

MAGIC = 0x4E4E4452
VERSION = 1
MAX_LAYERS = 16
MAX_UNITS = 65536
MAX_PARAMS = 1 << 26
#: Activation code -> name, as rd_nn_act_t.
ACTIVATIONS = {0: "identity", 1: "relu", 2: "tanh"}


@dataclass(frozen=True)
class Weights:
    """A parsed policy network of ``len(sizes) - 1`` dense layers.

    ``layers`` lists ``(name, array)`` in order: ``"<l>.weight"`` of shape
    (sizes[l+1], sizes[l]) (out x in, as torch.nn.Linear keeps it) and
    ``"<l>.bias"`` of shape (sizes[l+1],). The arrays are read-only views of
    one float32 buffer.
    """

    version: int
    sizes: Tuple[int, ...]
    activations: Tuple[str, ...]
    layers: Tuple[Tuple[str, np.ndarray], ...]

    @property
    def n_layers(self) -> int:
        return len(self.sizes) - 1

    def __getitem__(self, name: str) -> np.ndarray:
        for n, a in self.layers:
            if n == name:
                return a
        raise KeyError(name)

    def forward(self, x: Any) -> np.ndarray:
        """The network's output for inputs x of shape (..., sizes[0]) (float32)."""
        h = np.asarray(x, dtype=np.float32)
        if h.shape[-1:] != (self.sizes[0],):
            raise InvalidArgument(f"forward: inputs have {h.shape[-1:] or 'no'} features; the "
                                  f"network takes {self.sizes[0]}")
        for l, act in enumerate(self.activations):
            w, b = self.layers[2 * l][1], self.layers[2 * l + 1][1]
            h = h @ w.T + b
            if act == "relu":
                h = np.maximum(h, 0, out=h)
            elif act == "tanh":
                h = np.tanh(h, out=h)
        return h

    def to_torch(self) -> Any:
        """A new ``torch.nn.Sequential`` of Linear layers and ReLU/Tanh modules
        with these weights (float32, CPU). Needs torch."""
        import torch  # not a dependency of the package: only this method needs it
        mods: List[Any] = []
        for l, act in enumerate(self.activations):
            mods.append(torch.nn.Linear(self.sizes[l], self.sizes[l + 1]))
            if act == "relu":
                mods.append(torch.nn.ReLU())
            elif act == "tanh":
                mods.append(torch.nn.Tanh())
        net = torch.nn.Sequential(*mods)
        self.load_into(net)
        return net

    def load_into(self, module: Any) -> Any:
        """Copy the weights into the ``torch.nn.Linear`` layers of `module`,
        taken in ``module.modules()`` order; their count and shapes must match
        (InvalidArgument otherwise, and nothing is copied). Returns module.
        Activations are the module's own business: check ``activations``."""
        import torch  # not a dependency of the package: only this method needs it
        linears = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
        if len(linears) != self.n_layers:
            raise InvalidArgument(f"load_into: the module has {len(linears)} Linear layers; "
                                  f"the weights have {self.n_layers}")
        for l, lin in enumerate(linears):
            w = self.layers[2 * l][1]
            if tuple(lin.weight.shape) != w.shape or lin.bias is None:
                raise InvalidArgument(f"load_into: Linear {l} is {tuple(lin.weight.shape)}"
                                      f"{'' if lin.bias is not None else ' without bias'}; "
                                      f"the weights' layer {l} is {w.shape} with bias")
        with torch.no_grad():
            for l, lin in enumerate(linears):
                lin.weight.copy_(torch.from_numpy(np.array(self.layers[2 * l][1])))
                lin.bias.copy_(torch.from_numpy(np.array(self.layers[2 * l + 1][1])))
        return module


def parse(buf: bytes, version: int = 0) -> Weights:
    """Parse and check an RDNN buffer (InvalidArgument naming what is wrong)."""
    mv = memoryview(buf).cast("B")
    n = len(mv)
    if n < 12:
        raise InvalidArgument(f"RDNN: {n} bytes is shorter than the 12-byte header")
    magic, ver, L = np.frombuffer(mv, dtype="<u4", count=3)
    if magic != MAGIC:
        raise InvalidArgument(f"RDNN: bad magic 0x{int(magic):08x} (want 0x{MAGIC:08x}, \"RDNN\")")
    if ver != VERSION:
        raise InvalidArgument(f"RDNN: unknown version {int(ver)} (this client reads {VERSION})")
    if not 1 <= L <= MAX_LAYERS:
        raise InvalidArgument(f"RDNN: {int(L)} layers (1..{MAX_LAYERS})")
    L = int(L)
    head = 12 + 4 * (2 * L + 1)
    if n < head:
        raise InvalidArgument(f"RDNN: {n} bytes is shorter than the header of {L} layers ({head})")
    sizes = tuple(int(s) for s in np.frombuffer(mv, dtype="<u4", count=L + 1, offset=12))
    for i, s in enumerate(sizes):
        if not 1 <= s <= MAX_UNITS:
            raise InvalidArgument(f"RDNN: size {i} is {s} (1..{MAX_UNITS})")
    acts = []
    for l, a in enumerate(np.frombuffer(mv, dtype="<u4", count=L, offset=12 + 4 * (L + 1))):
        if int(a) not in ACTIVATIONS:
            raise InvalidArgument(f"RDNN: layer {l} has activation code {int(a)} (0, 1 or 2)")
        acts.append(ACTIVATIONS[int(a)])
    params = sum(sizes[l + 1] * sizes[l] + sizes[l + 1] for l in range(L))
    if params > MAX_PARAMS:
        raise InvalidArgument(f"RDNN: {params} parameters (at most {MAX_PARAMS})")
    want = head + 4 * params
    if n != want:
        what = "truncated" if n < want else "trailing bytes"
        raise InvalidArgument(f"RDNN: {what}: {n} bytes, {L} layers {sizes} need {want}")
    flat = np.frombuffer(mv, dtype="<f4", count=params, offset=head)
    bad = np.flatnonzero(~np.isfinite(flat))
    layers: List[Tuple[str, np.ndarray]] = []
    off = 0
    for l in range(L):
        o, i = sizes[l + 1], sizes[l]
        if bad.size and bad[0] < off + o * i + o:
            raise InvalidArgument(f"RDNN: layer {l} has a non-finite weight at index "
                                  f"{int(bad[0]) - off}")
        layers.append((f"{l}.weight", flat[off:off + o * i].reshape(o, i)))
        off += o * i
        layers.append((f"{l}.bias", flat[off:off + o]))
        off += o
    return Weights(version=version, sizes=sizes, activations=tuple(acts), layers=tuple(layers))
