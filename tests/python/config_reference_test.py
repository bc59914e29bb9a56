"""docs/configuration.md and its environment table held to the code.

usage: /usr/bin/python3 config_reference_test.py BIN_DIR

- Every flag a program's --help lists (greyhound-master, greyhound-agent, greyhound-run, each greyhoundctl
  command) is in its section of docs/configuration.md, and every flag there is in its --help.
- The master's defaults in the page are those its --help prints (read from its config structs).
- Every GREYHOUND_* variable the code reads (a string literal in C++ or Python, $VAR in a script) is in
  docs/configuration.md's "Environment variables" table, and every variable the table names is read somewhere (GREYHOUND_SIM_* are
  the stand-ins', documented in docs/simulation.md and by one row).
"""
import os
import re
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
BIN = None
FLAG = re.compile(r"--[a-z][a-z0-9-]*")


def help_of(*argv):
    out = subprocess.run([os.path.join(BIN, argv[0])] + list(argv[1:]) + ["--help"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, timeout=30)
    assert out.returncode == 0, out.stdout
    return out.stdout.decode()


def section(page, title):
    start = page.index("\n## " + title + "\n")
    end = page.find("\n## ", start + 1)
    return page[start:end if end >= 0 else len(page)]


def flags_in(text):
    return set(FLAG.findall(text)) - {"--help"}


class ConfigReference(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(os.path.join(ROOT, "docs", "configuration.md")) as f:
            cls.page = f.read()

    def test_every_programs_flags_are_documented_and_no_others(self):
        for program in ("greyhound-master", "greyhound-agent", "greyhound-run"):
            with self.subTest(program=program):
                usage = help_of(program)
                # The flags' own names: each table row's first cell (other cells may mention other flags).
                rows = re.findall(r"^\| `(--[a-z0-9-]+)", section(self.page, program), re.M)
                helped = set(re.findall(r"(?:^|\[|\s|\()(--[a-z][a-z0-9-]*)", usage)) - {"--help"}
                self.assertEqual(helped - set(rows), set(), "in --help, not in docs/configuration.md")
                self.assertEqual(set(rows) - helped, set(), "in docs/configuration.md, not in --help")

    def test_greyhoundctl_commands_flags(self):
        table = section(self.page, "greyhoundctl")
        listed = dict(re.findall(r"^\| `([a-z-]+)` \| `(.*)` \|$", table, re.M))
        commands = re.findall(r"^  ([a-z-]+) ", help_of("greyhoundctl"), re.M)
        self.assertEqual(set(commands), set(listed), "commands in greyhoundctl --help vs the page")
        for c in commands:
            with self.subTest(command=c):
                first = help_of("greyhoundctl", c).splitlines()[0]
                self.assertEqual(flags_in(first), flags_in(listed[c]))

    def test_the_masters_defaults_are_its_own(self):
        usage = help_of("greyhound-master")
        printed = dict(re.findall(r"^  (--[a-z0-9-]+)[^\n]*?\(default: ([^)\n]*)\)$", usage, re.M))
        documented = dict(re.findall(r"^\| `(--[a-z0-9-]+)[^`]*` \| ([^|]*) \|", section(self.page, "greyhound-master"), re.M))
        self.assertGreater(len(printed), 15)
        for flag, default in printed.items():
            with self.subTest(flag=flag):
                self.assertEqual(documented.get(flag, "").strip(), default.strip())

    def test_every_environment_variable_read_is_in_the_readme_and_back(self):
        read = {}
        for top in ("src", "daemon", "python", "scripts", "deploy", "bench", "include"):
            for d, _, files in os.walk(os.path.join(ROOT, top)):
                for name in files:
                    if name == "CMakeLists.txt" or name.endswith((".cmake", ".json", ".md", ".png", ".svg", ".csv")):
                        continue
                    path = os.path.join(d, name)
                    try:
                        with open(path, errors="replace") as f:
                            text = f.read()
                    except OSError:
                        continue
                    names = set(re.findall(r"\$\{?(GREYHOUND_[A-Z0-9_]+)", text))
                    if name.endswith((".cpp", ".h", ".py")):
                        names |= set(re.findall(r"[\"'](GREYHOUND_[A-Z0-9_]+)[\"']", text))
                    for n in names:
                        read.setdefault(n, path)
        with open(os.path.join(ROOT, "docs", "configuration.md")) as f:
            doc = f.read()
        table = doc[doc.index("\n## Environment variables"):]
        documented = set(re.findall(r"`(GREYHOUND_[A-Z0-9_]+)`", table))
        self.assertIn("GREYHOUND_REDIS", read)
        missing = {n: p for n, p in read.items() if n not in documented and not n.startswith("GREYHOUND_SIM_")}
        self.assertEqual(missing, {}, "read by the code, not in docs/configuration.md's table")
        self.assertEqual(documented - set(read), set(), "in docs/configuration.md's table, read nowhere")


if __name__ == "__main__":
    BIN = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
