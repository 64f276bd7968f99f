"""`quandary taxonomy`: print the ABISS taxonomy, styles and difficulties."""

import json

from pipelines.abiss.taxonomy import DIFFICULTIES, STYLES, SUBCATEGORIES, taxonomy_dict


def _run(args) -> int:
    if args.json:
        print(json.dumps(taxonomy_dict(), indent=2))
        return 0
    for s in SUBCATEGORIES:
        print(f"{s.group.value:<13} {s.id:<28} {s.category} / {s.name}")
    print("\nstyles:       " + ", ".join(s.id for s in STYLES))
    print("difficulties: " + ", ".join(d.id for d in DIFFICULTIES))
    return 0


def register(sub) -> None:
    p = sub.add_parser("taxonomy", help="print the 13-subcategory taxonomy, styles and difficulties")
    p.add_argument("--json", action="store_true", help="everything as JSON, with output schemas")
    p.set_defaults(func=_run)
