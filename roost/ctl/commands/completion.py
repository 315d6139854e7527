"""Print a shell completion script for roostctl, generated from its own parser.

``source <(roostctl completion bash)`` in ``~/.bashrc``; ``source <(roostctl completion zsh)`` in
``~/.zshrc`` (after ``compinit``), or save the zsh script as ``_roostctl`` in a ``$fpath`` dir.
"""

from __future__ import annotations

import argparse

from roost.ctl.context import Context

NAME = "completion"
HELP = "print a bash or zsh completion script"
DESCRIPTION = (
    "Print a completion script for your shell. bash: add 'source <(roostctl completion bash)' to\n"
    "~/.bashrc. zsh: add 'source <(roostctl completion zsh)' to ~/.zshrc after compinit."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("shell", choices=("bash", "zsh"), help="the shell to complete in: bash or zsh")


def run(ctx: Context, args: argparse.Namespace) -> int:
    from roost.ctl.main import build_parser
    from roost.ctl.shellcomp import bash_script, zsh_script

    parser, _ = build_parser()
    ctx.out.out.write(bash_script(parser) if args.shell == "bash" else zsh_script(parser))
    ctx.out.out.flush()
    return 0
