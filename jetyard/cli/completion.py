"""``jetyard completion bash|zsh|fish``: the shell code that completes ``jetyard``'s commands
and options, as argcomplete writes it (the shell asks ``jetyard`` itself, with
``_ARGCOMPLETE`` set, what may come next; ``jetyard.cli.main`` answers before doing anything else).

    eval "$(jetyard completion bash)"       # in ~/.bashrc
    eval "$(jetyard completion zsh)"        # in ~/.zshrc (after compinit)
    jetyard completion fish | source        # in ~/.config/fish/config.fish
"""

from __future__ import annotations

import argparse
from typing import Any

from argcomplete.shell_integration import shellcode

SHELLS = ("bash", "zsh", "fish")


def add_parser(sub: Any) -> None:
    completion = sub.add_parser(
        "completion",
        help='shell completion: eval "$(jetyard completion bash)" (or zsh, fish)',
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    completion.add_argument("shell", choices=SHELLS)


def script(shell: str) -> str:
    return shellcode(["jetyard"], shell=shell)


def run(args: argparse.Namespace) -> int:
    print(script(args.shell))
    return 0
