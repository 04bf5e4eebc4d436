"""jax 0.11's Mosaic GPU layout inference, the same answer sooner: its variables printed with
one numbering of the kernel instead of one each.

The inference (``jax.experimental.mosaic.gpu.layout_inference``, Warpgroup semantics) sorts the
variables of its equalities by their printed form (``constraints.compute_transitively_equal_vars``,
for a deterministic order), and a variable prints the first words of its operation
(``ValueSite.__str__``: ``str(operation)``). MLIR numbers every value of the whole module to print
one operation, so each print costs about as much as printing the kernel: the cluster MLP's sort
(456 variables) took 2.5-2.6 s of its 5.2-6.0 s lowering on the CPU (jax 0.11.2). Printed with
one ``ir.AsmState`` of the module, made once a sort, the same strings take 0.05 s, so the order
and the kernel are the same (tests/test_layout_search.py compares the strings and the lowered
modules, with jax 0.11).

``install()`` patches the two functions for jax 0.11 only (0.11.0-0.11.2 have the same code;
later versions: measure first). The patch is process-wide: once a kernel's builder installs it,
every Mosaic GPU kernel the process lowers sorts this way. ``ENABLED`` False turns it off (the
test's comparison). A thread that is not sorting prints as before.
"""

from __future__ import annotations

import io
import threading

from pallas_kernels import common

ENABLED = True
ORIGINALS: dict = {}  # jax's functions that install() replaced: "sort", "str"
_sorting = threading.local()  # .state: the AsmState of the sort in progress in this thread
_installing = threading.Lock()  # (two builders at once must not take the patch for jax's own)


def printed(site) -> str:
  """``ValueSite.__str__``: numbered by the AsmState of the sort in progress, if any."""
  from jax.experimental.mosaic.gpu import layout_inference
  state = getattr(_sorting, "state", None)
  if state is None:
    return ORIGINALS["str"](site)
  text = io.StringIO()
  site.operation.print(state=state, file=text)
  match = layout_inference._op_name_regex.match(text.getvalue())
  assert match is not None
  kind = {layout_inference.VariableType.OPERAND: "o",
          layout_inference.VariableType.RESULT: "r"}.get(site.type, "a")
  return f"{match.group(0)}:{kind}-{site.index}"


def install() -> None:
  """Patches jax 0.11's inference as above (once; nothing on other jax versions)."""
  if common.jax_version() != (0, 11):
    return
  from jax.experimental.mosaic.gpu import constraints, layout_inference
  with _installing:
    if ORIGINALS:
      return
    ORIGINALS.update(sort=constraints.compute_transitively_equal_vars,
                     str=layout_inference.ValueSite.__str__)
    layout_inference.ValueSite.__str__ = printed
    constraints.compute_transitively_equal_vars = _shared_sort


def _shared_sort(system):
  """``constraints.compute_transitively_equal_vars`` with one AsmState of the module in effect."""
  from jax.experimental.mosaic.gpu import constraints
  from jax._src.lib.mlir import ir
  site = next((c.lhs.key for c in system.constraints if isinstance(c, constraints.Equals)
               and isinstance(c.lhs, constraints.Variable)), None)
  if not ENABLED or site is None:
    return ORIGINALS["sort"](system)
  module = site.operation
  while module.parent is not None:
    module = module.parent
  outer, _sorting.state = getattr(_sorting, "state", None), ir.AsmState(module)
  try:
    return ORIGINALS["sort"](system)
  finally:
    _sorting.state = outer
