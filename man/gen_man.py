#!/usr/bin/env python3
"""The man page's option sections, generated from the option table (src/main/option_table.c).

man/fluxfs.1 is hand-written prose around blocks that the option table generates:

    .\\" BEGIN GENERATED options (scripts/gen-man; edit src/main/option_table.c)
    ...
    .\\" END GENERATED options

(and the same for "gcsfuse"). GENERATOR (build/man/fluxfs-man-options) prints a block's text.

Usage:
  gen_man.py GENERATOR IN OUT     write IN with every block regenerated to OUT
  gen_man.py --check GENERATOR MAN
                                  fail, with a diff, when MAN's blocks are not what the table
                                  generates (the meson test man-page-generated); the fix is
                                  scripts/gen-man
"""

import difflib
import re
import subprocess
import sys

BLOCK = re.compile(r'^(\.\\" BEGIN GENERATED (\w+) [^\n]*\n)(.*?)^(\.\\" END GENERATED \2\n)',
                   re.S | re.M)


def regenerate(generator, text):
    parts = []

    def fill(match):
        parts.append(match.group(2))
        body = subprocess.run([generator, match.group(2)], capture_output=True, text=True,
                              check=True).stdout
        return match.group(1) + body + match.group(4)

    out = BLOCK.sub(fill, text)
    if sorted(parts) != ["gcsfuse", "options"]:
        sys.exit(f"expected the blocks gcsfuse and options, found {parts}")
    return out


def main():
    args = sys.argv[1:]
    if len(args) == 3 and args[0] == "--check":
        generator, path = args[1], args[2]
        text = open(path, encoding="utf-8").read()
        want = regenerate(generator, text)
        if want == text:
            print(f"{path}: the generated option sections match the option table")
            return 0
        sys.stdout.writelines(difflib.unified_diff(
            text.splitlines(True), want.splitlines(True), path, "generated"))
        print(f"{path} differs from what src/main/option_table.c generates: run scripts/gen-man")
        return 1
    if len(args) == 3:
        generator, src, dst = args
        text = open(src, encoding="utf-8").read()
        open(dst, "w", encoding="utf-8").write(regenerate(generator, text))
        return 0
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
