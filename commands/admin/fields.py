"""The constrained field types the admin commands share: names, descriptions, reasons and
image names. Pure; no subjects."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from schemas.tenancy import NAME_PATTERN

Name = Annotated[str, Field(pattern=NAME_PATTERN)]
Description = Annotated[str, Field(max_length=1024)]
Reason = Annotated[str, Field(max_length=512)]
ImageName = Annotated[
    str, Field(min_length=1, max_length=256, pattern=r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$")
]
ImageLabels = Annotated[dict[str, Annotated[str, Field(max_length=4096)]], Field(max_length=64)]
"""An image's labels as the engine shows them: read for its service ports, not stored."""
