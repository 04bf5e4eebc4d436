"""3xTF32 in tiles of 32 against the FMA units in tiles of 16 for the MLP's smaller points (grid
kernel, random data, median of 5 epochs, xla beside it); as x3.py."""
import sys
sys.argv = [sys.argv[0], "small", sys.argv[1] if len(sys.argv) > 1 else "250"]
src = open(".device/x3.py").read().replace('''  "batch": [''', '''  "small": [((784, 256, 10), 64, 0.5, (("float32", 16), ("float32x3", 32))),
            ((784, 128, 10), 64, 0.5, (("float32", 16), ("float32x3", 32))),
            ((784, 256, 256, 10), 64, 0.1, (("float32", 16), ("float32x3", 32))),
            ((784, 256, 10), 32, 0.5, (("float32", 16), ("float32x3", 32)))],
  "batch": [''')
exec(compile(src, "x3.py", "exec"))
