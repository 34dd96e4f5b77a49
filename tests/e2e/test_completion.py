"""Shell completions generated from the CLI definitions (`runsnack __generate`, run by the build).

The bash script is loaded in bash and asked for completions the way bash asks (COMP_WORDS,
COMP_CWORD, then the function); fish answers `complete -C`; zsh parses its script.
"""

import os
import re
import shutil
import subprocess
import unittest

from harness import BIN

# The build writes them beside the binary's build tree: BUILD/share (src/cli/CMakeLists.txt).
SHARE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(BIN)))), "share")
BASH = os.path.join(SHARE, "bash-completion", "completions", "runsnack")
ZSH = os.path.join(SHARE, "zsh", "vendor-completions", "_runsnack")
FISH = os.path.join(SHARE, "fish", "vendor_completions.d", "runsnack.fish")


def bash_complete(words, cword=None):
    """What `runsnack WORDS<TAB>` offers: the completion function's COMPREPLY and whether it fell
    back to bash's default (file) completion."""
    cword = len(words) - 1 if cword is None else cword
    array = " ".join("'%s'" % w for w in words)
    script = ('source %s\n'
              'compopt() { [[ "$*" == *"-o default"* ]] && echo DEFAULT; }\n'  # compopt only works inside real completion
              'COMP_WORDS=(%s); COMP_CWORD=%d\n'
              '_runsnack\n'
              'printf "%%s\\n" "${COMPREPLY[@]}"\n' % (BASH, array, cword))
    r = subprocess.run(["bash", "--norc", "-c", script], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stdout.splitlines() if l]
    return [l for l in lines if l != "DEFAULT"], "DEFAULT" in lines


class BashCompletion(unittest.TestCase):
    def test_generated_file_matches_the_binary(self):
        r = subprocess.run([BIN, "__generate", "completion", "bash"], capture_output=True, text=True, check=True)
        self.assertEqual(open(BASH).read(), r.stdout)

    def test_loads_and_registers(self):
        r = subprocess.run(["bash", "--norc", "-c", "source %s && complete -p runsnack" % BASH],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "complete -F _runsnack runsnack")
        self.assertEqual(r.stderr, "")

    def test_subcommands(self):
        self.assertEqual(bash_complete(["runsnack", "sh"])[0], ["share", "shell"])
        top, _ = bash_complete(["runsnack", ""])
        for cmd in ("share", "info", "run", "pool", "doctor", "links", "revoke"):
            self.assertIn(cmd, top)
        self.assertNotIn("__generate", top)   # hidden
        self.assertNotIn("cuda-server", top)  # hidden
        self.assertEqual(sorted(bash_complete(["runsnack", "pool", ""])[0]),
                         sorted(["serve", "join", "submit", "status", "jobs", "cancel", "credits", "grant", "trust", "link",
                                 "audit-ledger"]))

    def test_flags_of_the_command_typed(self):
        self.assertEqual(bash_complete(["runsnack", "share", "--gp"])[0], ["--gpu", "--gpu-hours"])
        self.assertEqual(bash_complete(["runsnack", "share", "--serve"])[0], ["--serve-only"])
        self.assertEqual(bash_complete(["runsnack", "doctor", "--j"])[0], ["--json"])
        # Options before the command path do not hide it; a flag's value is skipped.
        self.assertEqual(bash_complete(["runsnack", "pool", "serve", "--db", "x.db", "--li"])[0], ["--listen"])
        self.assertNotIn("--gpu", bash_complete(["runsnack", "info", "--"])[0])

    def test_values_and_remote_commands_complete_files(self):
        words, default = bash_complete(["runsnack", "share", "--expose", ""])
        self.assertTrue(default, "an option's value gets file completion")
        self.assertEqual(words, [])
        words, default = bash_complete(["runsnack", "run", "box", "--", "pyth"])
        self.assertTrue(default, "the command after -- gets file completion")


class OtherShells(unittest.TestCase):
    def test_fish_completes_subcommands_and_flags(self):
        if not shutil.which("fish"):
            self.skipTest("fish is not installed (scripts/install-deps)")
        def fish(line):
            r = subprocess.run(["fish", "--no-config", "-c", "source %s; complete -C '%s'" % (FISH, line)],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            return [l.split("\t")[0] for l in r.stdout.splitlines()]
        self.assertEqual(fish("runsnack sh"), ["share", "shell"])
        self.assertIn("--serve-only", fish("runsnack share --ser"))
        self.assertIn("audit-ledger", fish("runsnack pool "))
        self.assertIn("--listen", fish("runsnack pool serve --db x --li"))

    def test_zsh_parses(self):
        if not shutil.which("zsh"):
            self.skipTest("zsh is not installed (scripts/install-deps)")
        r = subprocess.run(["zsh", "-n", ZSH], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        text = open(ZSH).read()
        self.assertTrue(text.startswith("#compdef runsnack"))
        self.assertIn("_runsnack_pool_serve()", text)


class ManPages(unittest.TestCase):
    def test_every_command_has_a_page_that_man_renders(self):
        man1 = os.path.join(SHARE, "man", "man1")
        pages = sorted(os.listdir(man1))
        for cmd in ("runsnack.1", "runsnack-share.1", "runsnack-doctor.1", "runsnack-pool.1"):
            self.assertIn(cmd, pages)
        if not shutil.which("man"):
            self.skipTest("man is not installed")
        for page in pages:
            r = subprocess.run(["man", "--warnings", "-l", "-Tutf8", os.path.join(man1, page)], capture_output=True,
                               text=True, env=dict(os.environ, MANWIDTH="80"))
            self.assertEqual(r.returncode, 0, page + ": " + r.stderr)
            self.assertEqual(r.stderr, "", page + ": groff warnings")
        r = subprocess.run(["man", "-l", os.path.join(man1, "runsnack-share.1")], capture_output=True, text=True,
                           env=dict(os.environ, MANWIDTH="80", MAN_KEEP_FORMATTING=""))
        plain = re.sub(".\b", "", r.stdout)  # overstrike bold and underline, where man keeps them
        self.assertIn("--serve-only", plain)
        self.assertIn("Make no new link", plain)


if __name__ == "__main__":
    unittest.main()
