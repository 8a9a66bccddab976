"""The PinLater IDL, loaded once from thrift/pinlater.thrift (the only copy of it).

The IDL is package data (`pinledger/thrift/pinlater.thrift` in an installed wheel),
found through importlib.resources, so an install outside the checkout has it too.
Both edges of the wire import it: the client and the service.
"""

from __future__ import annotations

from importlib.resources import as_file, files
from typing import Any

import thriftpy2

IDL_RESOURCE = files("pinledger.thrift").joinpath("pinlater.thrift")

with as_file(IDL_RESOURCE) as _path:
    pinlater: Any = thriftpy2.load(str(_path), module_name="pinlater_thrift")
