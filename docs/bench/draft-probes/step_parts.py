# Where a draft step of the 0.5B goes (the named draft as it drafts: 4-bit, its head cut): the whole one-token
# extend, its layers (one call of layer.cpp for all of them: `KernelStack`), the layers' products alone (dot8_mm on the
# same inputs), the head, and the rest; medians over steps after a prompt. From the repository root:
#   .venv/bin/python docs/bench/draft-probes/step_parts.py [steps]
import statistics
import sys
import time

import torch

from specdecode.load import default_draft, load_draft, load_target

torch.set_num_threads(2)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 40
t = load_target("qwen2.5-coder-1.5b")
m = load_draft(default_draft(t), t).fallback.model
ids = t.tokenizer.encode_chat([{"role": "user", "content": "Write a Python function that merges two sorted lists."}])
layer_times, head_times = [], []
real_stack = m._stack
assert real_stack is not None, "the draft's layers do not run as one stack on this CPU"


def timed_stack(*args):
    a = time.perf_counter()
    out = real_stack(*args)
    layer_times.append(time.perf_counter() - a)
    return out


m.__dict__["_stack"] = timed_stack  # (a cached_property: the instance's own entry wins)
real_head = m.head


class TimedHead:
    def __getattr__(self, name):
        return getattr(real_head, name)

    def __call__(self, x):
        a = time.perf_counter()
        y = real_head(x)
        head_times.append(time.perf_counter() - a)
        return y


m.head = TimedHead()
m.clear()
m.prefill(torch.tensor(ids), keep=1)
whole = []
token = 100
for _ in range(steps):
    a = time.perf_counter()
    logits = m.extend(torch.tensor([token]), keep=1)
    whole.append(time.perf_counter() - a)
    token = int(logits[-1].argmax())
layer_times, head_times = layer_times[1:], head_times[1:]  # (the prefill's)
x = torch.randn(1, m.shape.hidden)
products = []
for _ in range(steps):
    a = time.perf_counter()
    for layer in m.layers:
        layer.qkv(x)
        layer.o(torch.randn(1, layer.o.parts[0].in_features))
        g = layer.gate_up(x)
        layer.down(g[:, : layer.down.parts[0].in_features])
    products.append(time.perf_counter() - a)
med = lambda v: 1e3 * statistics.median(v)  # noqa: E731
print(f"draft step {med(whole):.2f} ms: layers {med(layer_times):.2f} (products alone {med(products):.2f}), head "
      f"{med(head_times):.2f}, the rest {med(whole) - med(layer_times) - med(head_times):.2f}; "
      f"weights {m.weight_bytes / 1e6:.0f} MB")
