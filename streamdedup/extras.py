"""Optional dependencies, imported only where they are needed, with a clear error when absent.

``pip install .`` (from the checkout) runs the consumer and ``check``: plotting (matplotlib) and the
ground truth of replay reports (scipy) are the ``report`` extra, so a consumer neither installs
them nor pays their import time (scipy alone took ~0.6 s of a 2.4 s start-up).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from streamdedup.errors import MissingExtraError

EXTRAS = {"scipy": "report", "matplotlib": "report", "redis": "redis", "starlette": "monitor",
          "uvicorn": "monitor", "scrapy": "scrapy", "pyspark": "spark",
          "pyarrow": "parquet"}


def require(module: str, purpose: str) -> ModuleType:
    """Import ``module`` or raise ``MissingExtraError`` naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        extra = EXTRAS.get(top, "")
        # from the checkout, as the README says: the name on PyPI is another project's
        hint = (f"pip install '.[{extra}]' in streamdedup's checkout" if extra
                else f"pip install {top}")
        raise MissingExtraError(
            f"{purpose} needs {top}, which is not installed here ({exc}); {hint}"
        ) from None
