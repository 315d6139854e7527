"""Shell completion scripts for bash and zsh, generated from roostctl's argparse parser.

Generated, not hand-written, so a new verb, flag or choice completes the day it is added. The
scripts complete verbs, each verb's flags, the choices of flags and positionals that have them
(``--state``, ``registry ls|add|verify``), and file names for flags that take a path.
"""

from __future__ import annotations

import argparse
import re
import shlex
from dataclasses import dataclass

__all__ = ["Verb", "bash_script", "verbs_of", "zsh_script"]

_PATHY = frozenset({"PATH", "DIR", "FILE"})


@dataclass(frozen=True)
class Flag:
    names: tuple[str, ...]
    help: str
    takes_value: bool
    choices: tuple[str, ...]
    path: bool


@dataclass(frozen=True)
class Verb:
    name: str
    help: str
    flags: tuple[Flag, ...]
    positionals: tuple[tuple[str, tuple[str, ...]], ...]  # (metavar, choices)


def _flag(action: argparse.Action) -> Flag:
    takes = action.nargs != 0
    choices = tuple(str(c) for c in action.choices) if action.choices else ()
    metavar = str(action.metavar or "")
    return Flag(tuple(action.option_strings), str(action.help or ""), takes, choices, metavar in _PATHY)


def _flags(parser: argparse.ArgumentParser) -> tuple[Flag, ...]:
    return tuple(_flag(a) for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS)


def verbs_of(parser: argparse.ArgumentParser) -> tuple[tuple[Flag, ...], tuple[Verb, ...]]:
    """The top-level flags and every verb with its flags and positionals."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: str(c.help or "") for c in sub._choices_actions}
    verbs = []
    for name, p in sub.choices.items():
        positionals = tuple(
            (str(a.metavar or a.dest), tuple(str(c) for c in a.choices) if a.choices else ())
            for a in p._actions
            if not a.option_strings
        )
        verbs.append(Verb(name, helps.get(name, ""), _flags(p), positionals))
    return _flags(parser), tuple(verbs)


def _words(flags: tuple[Flag, ...]) -> list[str]:
    return [n for f in flags for n in f.names]


def bash_script(parser: argparse.ArgumentParser) -> str:
    top, verbs = verbs_of(parser)
    value_flags = sorted({n for f in top for n in f.names if f.takes_value})
    path_flags = sorted({n for v in verbs for f in (*top, *v.flags) if f.path for n in f.names})
    lines = [
        "# bash completion for roostctl, generated from its parser: roostctl completion bash",
        "# Load it with: source <(roostctl completion bash)",
        "_roostctl() {",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" verb="" i',
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        case "${COMP_WORDS[i]}" in',
        f"            {'|'.join(value_flags) or '--never'}) ((i++)) ;;",
        "            -*) ;;",
        '            *) verb="${COMP_WORDS[i]}"; break ;;',
        "        esac",
        "    done",
        '    case "$prev" in',
        f'        {"|".join(path_flags) or "--never"}) COMPREPLY=($(compgen -f -- "$cur")); return ;;',
        "    esac",
        '    if [[ -z "$verb" ]]; then',
        f'        COMPREPLY=($(compgen -W {shlex.quote(" ".join([v.name for v in verbs] + _words(top)))} -- "$cur"))',
        "        return",
        "    fi",
        '    case "$verb" in',
    ]
    for v in verbs:
        lines.append(f"        {v.name})")
        with_choices = [f for f in v.flags if f.choices]
        if with_choices:
            lines.append('            case "$prev" in')
            for f in with_choices:
                words = shlex.quote(" ".join(f.choices))
                lines.append(
                    f'                {"|".join(f.names)}) COMPREPLY=($(compgen -W {words} -- "$cur")); return ;;'
                )
            lines.append("            esac")
        all_words = _words(v.flags) + [c for _, choices in v.positionals for c in choices]
        lines.append(f'            COMPREPLY=($(compgen -W {shlex.quote(" ".join(all_words))} -- "$cur")) ;;')
    lines += ["    esac", "}", "complete -F _roostctl roostctl", ""]
    return "\n".join(lines)


def _z(text: str) -> str:
    """Text safe inside a zsh _arguments spec in single quotes."""
    return re.sub(r"[\[\]:'\\]", "", text).replace("\n", " ")


def _zflag(f: Flag) -> list[str]:
    value = ""
    if f.takes_value:
        action = f"({' '.join(f.choices)})" if f.choices else ("_files" if f.path else " ")
        value = f":{_z(f.names[-1].lstrip('-'))}:{action}"
    if len(f.names) > 1:
        excl = " ".join(f.names)
        return [f"'({excl})'{{{','.join(f.names)}}}'[{_z(f.help)}]{value}'"]
    return [f"'{f.names[0]}[{_z(f.help)}]{value}'"]


def zsh_script(parser: argparse.ArgumentParser) -> str:
    top, verbs = verbs_of(parser)
    lines = [
        "#compdef roostctl",
        "# zsh completion for roostctl, generated from its parser: roostctl completion zsh",
        "# Load it with: source <(roostctl completion zsh)  (or save it as _roostctl in $fpath)",
        "_roostctl() {",
        "    local curcontext=$curcontext state line",
        "    local -a verbs",
        "    verbs=(",
        *[f"        '{v.name}:{_z(v.help)}'" for v in verbs],
        "    )",
        "    _arguments -C \\",
        *[f"        {spec} \\" for f in top for spec in _zflag(f)],
        "        '1: :->verb' \\",
        "        '*:: :->args'",
        "    case $state in",
        "        verb) _describe 'roostctl verb' verbs ;;",
        "        args)",
        "            case $words[1] in",
    ]
    for v in verbs:
        specs = [s for f in v.flags for s in _zflag(f)]
        for i, (meta, choices) in enumerate(v.positionals, start=1):
            specs.append(f"'{i}:{_z(meta)}:{'(' + ' '.join(choices) + ')' if choices else ' '}'")
        lines.append(f"                {v.name}) _arguments {' '.join(specs)} ;;")
    lines += [
        "            esac ;;",
        "    esac",
        "}",
        'if [[ "$funcstack[1]" = _roostctl ]]; then _roostctl "$@"; else compdef _roostctl roostctl; fi',
        "",
    ]
    return "\n".join(lines)
