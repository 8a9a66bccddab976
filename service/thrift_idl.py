"""The PinLater IDL, loaded once from thrift/pinlater.thrift (the only copy of it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import thriftpy2

IDL_PATH = Path(__file__).resolve().parent.parent / "thrift" / "pinlater.thrift"

pinlater: Any = thriftpy2.load(str(IDL_PATH), module_name="pinlater_thrift")
