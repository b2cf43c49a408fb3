#!/usr/bin/env python3
"""One source for the options: compares `fluxfs --help` with man/fluxfs.1 (a meson test).

--help is generated from the option table in src/main/options.c. This check fails, naming each
option, when
  - an option of --help's own sections (everything before "gcsfuse compatibility") has no
    entry (.TP) in the man page's OPTIONS section,
  - the man page has an entry for an option --help does not list (a removed or renamed one),
  - a gcsfuse spelling --help lists ("(gcsfuse: --x)" and the "gcsfuse compatibility"
    section) is not named anywhere in the man page.

Usage: check_options.py FLUXFS_BINARY MAN_PAGE
"""

import re
import subprocess
import sys

OPTION = re.compile(r"--[a-z0-9][a-z0-9_-]*")


def norm(name):
    return name.replace("_", "-")


def help_options(binary):
    text = subprocess.run([binary, "--help"], capture_output=True, text=True, check=True).stdout
    native, gcsfuse_names = set(), set()
    in_gcsfuse = False
    for line in text.splitlines():
        if line and not line[0].isspace():
            in_gcsfuse = line.startswith("gcsfuse compatibility")
            continue
        entry = re.match(r"^ {2}(?:-[A-Za-z], | {4})(--[a-z0-9_-]+)", line)
        if entry:
            (gcsfuse_names if in_gcsfuse else native).add(norm(entry.group(1)))
        for spelled in re.findall(r"gcsfuse: ([^)]*)", line):
            gcsfuse_names.update(norm(n) for n in OPTION.findall(spelled))
    # A "(gcsfuse: ...)" note can wrap onto the next line.
    for note in re.findall(r"\(gcsfuse:([^)]*)\)", text):
        gcsfuse_names.update(norm(n) for n in OPTION.findall(note))
    return native, gcsfuse_names


def man_options(path):
    text = open(path, encoding="utf-8").read()
    plain = text.replace("\\-", "-").replace("\\fB", "").replace("\\fI", "").replace("\\fR", "")
    section = re.search(r"^\.SH OPTIONS$(.*?)^\.SH ", text, re.S | re.M)
    if not section:
        sys.exit(f"{path}: no OPTIONS section")
    entries = set()
    lines = section.group(1).splitlines()
    for i, line in enumerate(lines):
        if line == ".TP" and i + 1 < len(lines):
            head = lines[i + 1].replace("\\-", "-")
            entries.update(norm(n) for n in OPTION.findall(head))
    named = {norm(n) for n in OPTION.findall(plain)}
    return entries, named


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    native, gcsfuse_names = help_options(sys.argv[1])
    entries, named = man_options(sys.argv[2])
    problems = []
    for name in sorted(native - entries):
        problems.append(f"{name}: in --help, no entry in the man page's OPTIONS")
    negated = {"--no-" + n[2:] for n in native}  # boolean options' --no-NAME
    for name in sorted(entries - native - gcsfuse_names - negated):
        problems.append(f"{name}: a man page entry, not in --help")
    for name in sorted(gcsfuse_names - named):
        problems.append(f"{name}: a gcsfuse spelling in --help, not named in the man page")
    if not native or not gcsfuse_names:
        problems.append("could not read the options from --help")
    for p in problems:
        print(p)
    print(f"{len(native)} options, {len(gcsfuse_names)} gcsfuse spellings compared; "
          f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
