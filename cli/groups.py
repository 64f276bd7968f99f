"""Command groups shared by several CLI modules (``report``, ``audit``, ``ambitab``).

Modules register in alphabetical order, so whichever comes first creates the group and the
others add their sub-commands to it; a second ``add_parser`` of the same name would clash.
"""

import argparse


def subgroup(sub, name: str, help: str, dest: str) -> argparse._SubParsersAction:
    """The sub-commands action of group ``name``, creating the group when no module has yet."""
    parser = sub.choices.get(name)
    if parser is None:
        parser = sub.add_parser(name, help=help)
        return parser.add_subparsers(dest=dest, required=True, metavar="SUBCOMMAND")
    for action in parser._actions:  # argparse keeps the sub-commands action on the parser
        if isinstance(action, argparse._SubParsersAction):
            return action
    return parser.add_subparsers(dest=dest, required=True, metavar="SUBCOMMAND")
