"""What the console's forms check before they send anything, as data: the bounds and patterns
the gateway and the command model apply to ``createSession`` and to folder names, taken from
the code that applies them (``schemas.bounds``, ``schemas.session``, ``schemas.vfolder``) and
from this gateway's configured maximums. Served as ``/console/rules.json``; the form code in
``static/js/rules.js`` reads it, so a changed limit reaches the form without a JS edit.

The console checks to help people, not to protect anything: the gateway checks again, and its
answer is what the page shows when it refuses. Pure; no subjects."""

from __future__ import annotations

from typing import Any

# The very patterns and bounds the checks use, read here so that the form cannot drift from them.
from schemas.bounds import CPU_MIN_MILLI, DIGITS_MAX, MEMORY_MIN_BYTES, InputLimits
from schemas.ids import TOKEN_PATTERN
from schemas.session import (
    ENV_NAME,
    MAX_COMMAND_WORDS,
    MAX_DEPENDENCIES,
    MAX_ENV,
    MAX_KERNELS,
    SessionSpec,
)
from schemas.vfolder import (
    FOLDER_NAME_PATTERN,
    MAX_MOUNT_PATH,
    MAX_MOUNTS,
    MOUNT_PATH_CHARS,
    MOUNT_ROOT,
    RESERVED_MOUNT_PATHS,
)


def _property(name: str) -> dict[str, Any]:
    """One field of the session spec's JSON schema, its ``null`` alternative left out."""
    found: dict[str, Any] = SessionSpec.model_json_schema()["properties"][name]
    for option in found.get("anyOf", []):
        if option.get("type") != "null":
            return {**found, **option}
    return found


def form_rules(limits: InputLimits) -> dict[str, Any]:
    """The rules as the console's JavaScript reads them (plain JSON; regexes in a syntax that
    Python and JavaScript read alike)."""
    image, name, group = _property("image"), _property("name"), _property("resource_group")
    priority, timeout = _property("priority"), _property("timeout_s")
    return {
        "cpu": {"minMilli": CPU_MIN_MILLI, "maxMilli": limits.max_cpu_milli},
        "memory": {"minBytes": MEMORY_MIN_BYTES, "maxBytes": limits.max_memory_bytes},
        "gpu": {"maxHundredths": limits.max_gpu_hundredths},
        "digitsMax": DIGITS_MAX,
        "clusterSize": {"max": MAX_KERNELS},
        "image": {"pattern": image["pattern"], "maxLength": image["maxLength"]},
        "name": {"pattern": name["pattern"], "maxLength": name["maxLength"]},
        "resourceGroup": {"pattern": group["pattern"]},
        "priority": {"min": priority["minimum"], "max": priority["maximum"]},
        "timeoutSeconds": {"min": 1, "max": min(timeout["maximum"], limits.max_seconds)},
        "text": {"maxLength": limits.max_text},
        "command": {"maxWords": MAX_COMMAND_WORDS},
        "env": {"max": MAX_ENV, "namePattern": ENV_NAME.pattern},
        "dependsOn": {"max": MAX_DEPENDENCIES, "pattern": TOKEN_PATTERN.pattern},
        "mounts": {
            "max": MAX_MOUNTS,
            "maxPath": MAX_MOUNT_PATH,
            "root": MOUNT_ROOT,
            "pathPattern": MOUNT_PATH_CHARS.pattern,
            "reserved": list(RESERVED_MOUNT_PATHS),
        },
        "folderName": {"pattern": FOLDER_NAME_PATTERN},
    }
