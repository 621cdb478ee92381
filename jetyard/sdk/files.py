"""The files of one virtual folder, from Python: the small calls (``jetyard.sdk.transfer``),
resumable uploads (``jetyard.sdk.uploads``) and downloads (``jetyard.sdk.downloads``) in one
object, as ``Folders.files`` hands it out. Talks HTTP only, to the storage data plane."""

from __future__ import annotations

from jetyard.sdk.downloads import Downloads
from jetyard.sdk.uploads import Uploads


class FolderFiles(Uploads, Downloads):
    """The files of one folder. ``grants`` issues its tokens; ``http`` is a plain client (the
    token is the only credential the data plane takes)."""
