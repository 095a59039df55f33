"""Build a dot8.cpp alone (torch.ops.specdecode.dot8_mm) into DIR with its prefetch distance AHEAD set to N groups;
the tree's own dot8.cpp, or the one given (another commit's: `git show 2d95e84:specdecode/models/dot8.cpp > F`):
    .venv/bin/python docs/bench/slow-hour-probes/build_variant.py /tmp/dot8-ahead8 8 [F]
(a library of its own per variant: two cannot be loaded in one process, so product_rows.py runs once per DIR)."""
import re
import shutil
import sys
from pathlib import Path

from torch.utils.cpp_extension import load

directory, ahead = Path(sys.argv[1]), int(sys.argv[2])
directory.mkdir(parents=True, exist_ok=True)
models = Path(__file__).resolve().parents[3] / "specdecode" / "models"
shutil.copy(models / "kernels.h", directory)
source = Path(sys.argv[3] if len(sys.argv) > 3 else models / "dot8.cpp").read_text()
source, n = re.subn(r"constexpr int64_t AHEAD = \d+;", f"constexpr int64_t AHEAD = {ahead};", source)
assert n == 1, "AHEAD not found in dot8.cpp"
(directory / "dot8.cpp").write_text(source)
load(name="sdvar", sources=[str(directory / "dot8.cpp")], extra_cflags=["-O3", "-fopenmp"],
     extra_ldflags=["-fopenmp"], build_directory=str(directory), is_python_module=False, verbose=False)
print("built", directory)
