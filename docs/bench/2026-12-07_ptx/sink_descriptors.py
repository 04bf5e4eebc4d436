"""A PTX experiment: the hoisted wgmma descriptors of a kernel's step loop rebuilt before each
use inside the loop, from an address offset by a value loaded then (as FRESH_DESCRIPTORS does),
to see what ptxas then allocates. The numbers it computes are wrong (the loaded value is not
zero): registers only.

  PYTHONPATH=. python docs/bench/2026-12-07_ptx/sink_descriptors.py in.ptx out.ptx
"""
import re, sys
from probes import spills  # (run from the checkout root with PYTHONPATH=.)

src, dst = sys.argv[1], sys.argv[2]
lines = open(src).read().splitlines()
first, last = spills.longest_loop(lines)
hoisted = {spills.built_descriptor(l) for l in lines[:first]}
defs = {}
for l in lines[:first]:
  if (m := re.match(r"\s*(add\.s64|or\.b64|bfe\.u64)\s+(%rd\d+),\s*(%rd\d+),\s*(.*);", l)):
    defs[m.group(2)] = (m.group(1), m.group(3), m.group(4))
def desc_chain(r):  # [(op, dst, src, rest)] from a base not in defs
  chain = []
  while r in defs:
    op, s, rest = defs[r]
    chain.append((op, r, s, rest))
    r = s
  return chain[::-1], r
maxrd = max(int(x) for x in re.findall(r"%rd(\d+)", "\n".join(lines)))
nxt = [maxrd + 1]
def new():
  nxt[0] += 1
  return f"%rd{nxt[0]}"
out, moved = [], 0
for i, l in enumerate(lines):
  if first <= i <= last and "wgmma.mma_async" in l:
    head, tail = l.split("}", 1) if "}," in l else (None, None)
    regs = re.findall(r"%rd\d+", tail) if tail else []
    for r in dict.fromkeys(regs):
      if r not in hoisted:
        continue
      chain, base = desc_chain(r)
      z = new()
      out.append(f"\tld.volatile.shared.u64 \t{z}, [{base}];")
      cur = new(); out.append(f"\tadd.s64 \t{cur}, {base}, {z};")
      for op, d, s, rest in chain:
        n = new(); out.append(f"\t{op} \t{n}, {cur}, {rest};"); cur = n
      tail = re.sub(rf"{re.escape(r)}\b", cur, tail)
      moved += 1
    l = head + "}" + tail if tail else l
  out.append(l)
text = "\n".join(out) + "\n"
text = re.sub(r"\.reg \.b64 \t?%rd<(\d+)>;", lambda m: f".reg .b64 \t%rd<{nxt[0] + 1}>;", text)
open(dst, "w").write(text)
before = spills.descriptors(open(src).read())
print(f"{moved} descriptor uses rebuilt in the loop; (inside, before, products) before: {before}, "
      f"after: {spills.descriptors(text)}")
