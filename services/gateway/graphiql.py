"""GraphiQL served from the package: strawberry's page with every script and stylesheet
pointed at ``/graphiql-assets/`` (a lab's cluster often has no internet). The vendored files
are byte-identical to the CDN's, so the page's integrity hashes still hold. Reads and writes
nothing."""

from __future__ import annotations

import re
from pathlib import Path

from strawberry.http.ides import get_graphql_ide_html

ASSETS = Path(__file__).parent / "static" / "graphiql"
ASSETS_URL = "/graphiql-assets"
LOCAL = {
    "https://unpkg.com/react@18.2.0/umd/react.production.min.js": "react.production.min.js",
    "https://unpkg.com/react-dom@18.2.0/umd/react-dom.production.min.js": (
        "react-dom.production.min.js"
    ),
    "https://unpkg.com/js-cookie@3.0.5/dist/js.cookie.min.js": "js.cookie.min.js",
    "https://unpkg.com/graphiql@3.8.3/graphiql.min.css": "graphiql.min.css",
    "https://unpkg.com/@graphiql/plugin-explorer@1.0.2/dist/style.css": "plugin-explorer.css",
    "https://unpkg.com/graphiql@3.8.3/graphiql.min.js": "graphiql.min.js",
    "https://unpkg.com/@graphiql/plugin-explorer@1.0.2/dist/index.umd.js": (
        "plugin-explorer.umd.js"
    ),
}
_EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["'](https?:)?//""")


class ExternalAssetError(RuntimeError):
    """The page still names a file on another host (strawberry changed its page)."""


def local_page() -> str:
    """The GraphiQL page with local assets; refuses to build one that would load anything
    from elsewhere."""
    page = get_graphql_ide_html(graphql_ide="graphiql")
    for url, name in LOCAL.items():
        page = page.replace(url, f"{ASSETS_URL}/{name}")
    page = page.replace(" crossorigin\n", "\n").replace("crossorigin ", "")
    if _EXTERNAL.search(page):
        raise ExternalAssetError(
            "strawberry's GraphiQL page names an asset this gateway does not ship: "
            "update services/gateway/graphiql.py and static/graphiql/"
        )
    return page
