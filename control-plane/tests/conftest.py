"""Make ``flexpass_cp`` importable when the package is not installed."""

import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]  # control-plane/
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))
