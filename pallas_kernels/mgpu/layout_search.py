"""jax 0.11's Mosaic GPU layout inference, the same answer sooner: its variables printed with
one numbering of the kernel instead of one each.

The inference (``jax.experimental.mosaic.gpu.layout_inference``, Warpgroup semantics) sorts the
variables of its equalities by their printed form (``constraints.compute_transitively_equal_vars``,
for a deterministic order), and a variable prints the first words of its operation
(``ValueSite.__str__``: ``str(operation)``). MLIR numbers every value of the whole module to print
one operation, so each print costs as much as printing the kernel: the cluster MLP's 814
variables took 2.5-2.8 s of its 5.6-6.7 s lowering on the CPU (jax 0.11.2). Printed with one
``ir.AsmState`` of the module, made once a sort, the same text takes 0.04 s. The strings are the
same (the test compares them and the lowered kernels), so the order and the kernel are too.

``install()`` patches the two functions for jax 0.11 only (later versions: measure first);
``ENABLED`` False turns it off (for the test's comparison). A thread that is not sorting prints
as before.
"""

from __future__ import annotations

import functools
import io
import threading

ENABLED = True
_sorting = threading.local()  # .state: the AsmState of the sort in progress in this thread


def _jax_version() -> tuple[int, int]:
  import jax
  return tuple(int(p) for p in jax.__version__.split(".")[:2])


def install() -> None:
  """Patches jax 0.11's inference as above (once; nothing on other jax versions)."""
  if _jax_version() != (0, 11):
    return
  from jax.experimental.mosaic.gpu import constraints, layout_inference
  sort = constraints.compute_transitively_equal_vars
  if getattr(sort, "shared_numbering", False):
    return
  from jax._src.lib.mlir import ir
  site_str = layout_inference.ValueSite.__str__
  kinds = {layout_inference.VariableType.OPERAND: "o", layout_inference.VariableType.RESULT: "r"}

  def printed(site):  # ValueSite.__str__, numbered by the sort's AsmState
    state = getattr(_sorting, "state", None)
    if state is None:
      return site_str(site)
    text = io.StringIO()
    site.operation.print(state=state, file=text)
    name = layout_inference._op_name_regex.match(text.getvalue()).group(0)
    return f"{name}:{kinds.get(site.type, 'a')}-{site.index}"

  @functools.wraps(sort)
  def shared_sort(system):
    sites = [v.key for c in system.constraints for v in (getattr(c, "lhs", None),
             getattr(c, "rhs", None)) if isinstance(v, constraints.Variable)]
    if not ENABLED or not sites:
      return sort(system)
    module = sites[0].operation
    while module.parent is not None:
      module = module.parent
    _sorting.state = ir.AsmState(module)
    try:
      return sort(system)
    finally:
      _sorting.state = None

  shared_sort.shared_numbering = True
  layout_inference.ValueSite.__str__ = printed
  constraints.compute_transitively_equal_vars = shared_sort
