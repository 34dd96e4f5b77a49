"""The CLI surface: link parsing errors, saved remotes, identity, --help."""

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import unittest

from harness import (BIN, CMD_TIMEOUT, READY_DEADLINE, E2ETestCase, BASE32_RE, SHELL_SAFE_LINK_RE, join_link,
                     link_secret, read_terminal, split_link)

GRANT = "abcdefgh23"
PEER = "xklk6juawrgi4pv3was2enxliwpcgcce"
SECRET = "w7mgdzgcjbqenmh5ear35wghqa"
GOOD = "runsnack:///g/%s?peer=%s&c=127.0.0.1:9#k=%s" % (GRANT, PEER, SECRET)  # the first spelling, still read
NEW = "runsnack:///g/%s/p/%s/c/127.0.0.1:9/k/%s" % (GRANT, PEER, SECRET)      # the one written since issue 39


class MalformedLinks(E2ETestCase):
    CASES = [
        # (description, link, words the one error line must contain)
        ("cut in the middle of the secret", GOOD[:-13], ["secret", "26"]),
        ("no #k= fragment", GOOD.split("#")[0], ["missing secret"]),
        ("empty secret", GOOD.split("#")[0] + "#k=", ["missing secret"]),
        ("wrong scheme (one slash)", GOOD.replace("runsnack:///", "runsnack:/"), ["scheme must be runsnack://"]),
        ("rendezvous but no /g/ path", GOOD.replace("runsnack:///", "runsnack://"), ["path must be /g/"]),
        ("port out of range", GOOD.replace(":9#", ":99999#"), ["candidate", "port"]),
        ("port zero", GOOD.replace(":9#", ":0#"), ["candidate", "port"]),
        ("port not a number", GOOD.replace(":9#", ":9x#"), ["candidate"]),
        ("port missing", GOOD.replace(":9#", "#"), ["candidate", "missing port"]),
        ("short peer id", GOOD.replace(PEER, PEER[:-1]), ["peer id", "32"]),
        ("no peer id", GOOD.replace("peer=" + PEER + "&", ""), ["provider id"]),
        ("short grant id", GOOD.replace(GRANT, GRANT[:6]), ["grant id"]),
        ("secret last character changed", GOOD[:-1] + "b", ["secret"]),
        ("no address at all", GOOD.replace("&c=127.0.0.1:9", ""), ["no way to reach"]),
        ("a tab inside is removed, a quote is not", GOOD.replace("&c=", "&c=\t\""), ["invalid character"]),
        ("too long", GOOD + "x" * 3000, ["too long"]),
        ("unknown link type", GOOD.replace("/g/", "/zz/"), ["newer runsnack"]),
        # The same mistakes in the path spelling.
        ("path: cut in the middle of the secret", NEW[:-13], ["secret", "26"]),
        ("path: no /k/", NEW.split("/k/")[0], ["missing secret", "cut off"]),
        ("path: no secret after /k/", NEW.split("/k/")[0] + "/k/", ["missing secret"]),
        ("path: port out of range", NEW.replace(":9/", ":99999/"), ["candidate", "port"]),
        ("path: port missing", NEW.replace(":9/", "/"), ["candidate", "missing port"]),
        ("path: short peer id", NEW.replace(PEER, PEER[:-1]), ["peer id", "32"]),
        ("path: no peer id", NEW.replace("/p/" + PEER, ""), ["provider id"]),
        ("path: short grant id", NEW.replace(GRANT, GRANT[:6]), ["grant id"]),
        ("path: no address at all", NEW.replace("/c/127.0.0.1:9", ""), ["no way to reach"]),
        ("path: a field twice", NEW.replace("/k/", "/p/" + PEER + "/k/"), ["twice"]),
        ("path: a shell character", NEW.replace("/c/", "/c/*"), ["invalid character '*'"]),
        ("path: unknown link type", NEW.replace("/g/", "/zz/"), ["newer runsnack"]),
    ]

    def test_malformed_links_fail_clearly(self):
        home = self.new_home("consumer")
        for desc, link, words in self.CASES:
            with self.subTest(desc):
                cp = self.run_cli(home, "info", "--json", "--timeout", "2", link)
                self.assertEqual(cp.returncode, 1, "%s: rc=%d stderr=%r" % (desc, cp.returncode, cp.stderr))
                self.assertEqual(cp.stdout, "")
                lines = cp.stderr.splitlines()
                self.assertEqual(len(lines), 1, "%s: want exactly one stderr line, got %r" % (desc, cp.stderr))
                self.assertTrue(lines[0].startswith("runsnack: "), lines[0])
                for w in words:
                    self.assertIn(w.lower(), lines[0].lower(), "%s: %r should mention %r" % (desc, lines[0], w))
                # The error must not echo the secret back (it may end up in logs or screenshots).
                if desc != "too long":
                    self.assertNotIn(SECRET, lines[0], desc)

    def test_remote_add_rejects_malformed_link(self):
        home = self.new_home("consumer")
        self.fails(home, "remote", "add", "x", "-", input=GOOD[:-13] + "\n", contains="secret")
        self.fails(home, "remote", "add", "x", "-", input="\n", contains="no link on stdin")
        self.assertEqual(json.loads(self.ok(home, "remote", "list", "--json").stdout), [])

    def test_not_a_link_nor_a_remote(self):
        home = self.new_home("consumer")
        self.fails(home, "info", "nosuchname", contains="neither a link nor a saved remote")
        self.fails(home, "info", contains="no link given")

    def test_wrong_scheme_named_on_command_line(self):
        """Text with "://" can never be a saved remote name ([A-Za-z0-9._-]), so a pasted
        https://... link should get parse_link's "scheme must be runsnack://", as it does on stdin."""
        home = self.new_home("consumer")
        wrong = GOOD.replace("runsnack://", "https://")
        self.fails(home, "info", "-", input=wrong + "\n", contains="scheme must be runsnack://")
        self.fails(home, "info", wrong, contains="scheme must be runsnack://")

    def test_link_spelling_accepted_everywhere(self):
        """A link parse_link accepts (scheme in capitals, surrounding whitespace) must work on the
        command line as it does on stdin and in RUNSNACK_LINK. Nothing listens on the link's
        port, so a link that was understood fails with "cannot reach the provider"."""
        home = self.new_home("consumer")
        for desc, link in [("upper-case scheme", GOOD.replace("runsnack://", "RUNSNACK://")),
                           ("leading space", " " + GOOD),
                           ("trailing newline", GOOD + "\n"),
                           ("a space inside", GOOD.replace("&c=", "&c= ")),
                           ("path spelling", NEW),
                           ("path spelling in capitals", NEW.upper()),
                           ("path spelling wrapped", NEW[:30] + "\n  " + NEW[30:])]:
            with self.subTest(desc):
                self.fails(home, "info", "--timeout", "3", "-", input=link + "\n", contains="cannot reach the provider")
                self.fails(home, "info", "--timeout", "3", env_extra={"RUNSNACK_LINK": link},
                           contains="cannot reach the provider")
                self.fails(home, "info", "--timeout", "3", link, contains="cannot reach the provider")


class ShellSafeLinks(E2ETestCase):
    """Issue 39: a link pasted without quotes into bash, zsh or fish works (it holds no character a shell treats
    specially), and so does one a chat client wrapped over two lines; links of the first spelling still work."""

    SHELLS = ("bash", "zsh", "fish")  # scripts/install-deps installs all three

    def shell(self, name, home, script, input=None):
        """Runs `script` in shell `name` as a person would type it, with $HOME a folder of the test's own."""
        env = self.env(home, {"HOME": self.new_home(), "XDG_CONFIG_HOME": self.new_home(), "XDG_DATA_HOME": self.new_home()})
        cp = subprocess.run([name, "-c", script], input=input or "", capture_output=True, text=True, errors="replace",
                            env=env, timeout=CMD_TIMEOUT)
        self._stderrs.append(("%s -c %s" % (name, script), cp.stderr))
        return cp

    def test_link_pasted_without_quotes(self):
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        # The link as a person copies it: share's first line on stdout.
        human = self.start(phome, "share", "--listen", "127.0.0.1:0", "--no-qr", name="share")
        self.poll_until(lambda: human.lines, READY_DEADLINE, "the link on stdout")
        link = human.lines[0].strip()
        self.assertRegex(link, SHELL_SAFE_LINK_RE, "share printed a link a shell would change")
        grant = split_link(link)["grant"]
        for shell in self.SHELLS:
            if not shutil.which(shell):
                print("\n%s not installed (scripts/install-deps installs it): not tried" % shell)
                continue
            with self.subTest(shell):
                cp = self.shell(shell, chome, "%s info --json %s" % (shlex.quote(BIN), link))
                self.assertEqual(cp.returncode, 0, "%s: stdout=%r stderr=%r" % (shell, cp.stdout, cp.stderr))
                info = json.loads(cp.stdout.strip().splitlines()[-1])
                self.assertEqual(info["grant"]["id"], grant)
                # Saved under a name, unquoted too; the saved link is the same one.
                cp = self.shell(shell, chome, "%s remote add box-%s %s" % (shlex.quote(BIN), shell, link))
                self.assertEqual(cp.returncode, 0, "%s: %r" % (shell, cp.stderr))
                self.assertEqual(self.info(chome, "box-" + shell)["grant"]["id"], grant)

    def test_link_wrapped_by_a_chat_client(self):
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        provider = self.start_provider(phome)
        link = provider.link
        for cut in (len("runsnack://") + 4, len(link) // 2, len(link) - 10):  # in the address, the middle, the secret
            for desc, text in (("newline", link[:cut] + "\n" + link[cut:]),
                               ("newline and indent", link[:cut] + "\r\n    " + link[cut:]),
                               ("space", link[:cut] + " " + link[cut:])):
                with self.subTest("%s at %d" % (desc, cut)):
                    # Quoted on the command line, as pasted between the quotes in a shell.
                    cp = self.shell("bash", chome, "%s info --json '%s'" % (shlex.quote(BIN), text))
                    self.assertEqual(cp.returncode, 0, cp.stderr)
                    self.assertEqual(json.loads(cp.stdout.strip().splitlines()[-1])["grant"]["id"], provider.grant)
                    # Pasted at the prompt of `info -` (two lines: the second is read too), and in RUNSNACK_LINK.
                    self.assertEqual(self.info(chome, "-", input=text + "\n")["grant"]["id"], provider.grant)
                    cp = self.ok(chome, "info", "--json", env_extra={"RUNSNACK_LINK": text})
                    self.assertEqual(json.loads(cp.stdout)["grant"]["id"], provider.grant)
        # `remote add NAME -` keeps the whole link, not its first line.
        self.ok(chome, "remote", "add", "wrapped", "-", input=link[:40] + "\n" + link[40:] + "\n")
        self.assertEqual(self.info(chome, "wrapped")["grant"]["id"], provider.grant)

    def test_links_of_the_first_spelling_still_work(self):
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        provider = self.start_provider(phome)
        old = join_link(split_link(provider.link), legacy=True)
        self.assertIn("?peer=", old)
        self.assertEqual(self.info(chome, old)["grant"]["id"], provider.grant)
        self.ok(chome, "remote", "add", "old", "-", input=old + "\n")
        self.assertEqual(self.info(chome, "old")["grant"]["id"], provider.grant)
        # Cut by a shell at its '&' (pasted without quotes): the error says so.
        self.fails(chome, "info", "--json", old.split("&")[0], contains=["missing secret", "quotes"])


class Remotes(E2ETestCase):
    def test_remote_lifecycle(self):
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        provider = self.start_provider(phome)
        secret = link_secret(provider.link)

        cp = self.ok(chome, "remote", "add", "gpubox", "-", input=provider.link + "\n")
        self.assertIn(provider.peer, cp.stdout)
        self.assertNotIn(secret, cp.stdout + cp.stderr)
        path = os.path.join(chome, "remotes.json")
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
        self.fails(chome, "remote", "add", "gpubox", "-", input=provider.link + "\n", contains="exists")

        info = self.info(chome, "gpubox")
        self.assertEqual(info["grant"]["id"], provider.grant)
        self.assertEqual(info["grant"]["connections"], 1)
        # No LINK argument: RUNSNACK_LINK.
        cp = self.ok(chome, "info", "--json", env_extra={"RUNSNACK_LINK": provider.link})
        self.assertEqual(json.loads(cp.stdout)["grant"]["connections"], 2)

        listed = self.ok(chome, "remote", "list", "--json")
        self.assertNotIn(secret, listed.stdout)
        rows = json.loads(listed.stdout)
        self.assertEqual(len(rows), 1)
        self.assertEqual(rows[0]["name"], "gpubox")
        self.assertEqual(rows[0]["provider"], provider.peer)
        self.assertEqual(rows[0]["grant"], provider.grant)
        self.assertEqual(rows[0]["candidates"], [provider.listen])
        human = self.ok(chome, "remote", "list")
        self.assertIn("gpubox", human.stdout)
        self.assertNotIn(secret, human.stdout)

        self.ok(chome, "remote", "remove", "gpubox")
        self.assertEqual(json.loads(self.ok(chome, "remote", "list", "--json").stdout), [])
        self.fails(chome, "info", "--json", "gpubox", contains=["gpubox", "neither a link nor a saved remote"])
        self.fails(chome, "remote", "remove", "gpubox", contains="no saved remote")

    def test_remote_add_at_a_terminal_prompts_and_hides_the_link(self):
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        provider = self.start_provider(phome)
        secret = link_secret(provider.link)
        # stdin and stderr on a terminal: what the terminal shows is all the master side reads.
        master, slave = os.openpty()
        proc = subprocess.Popen([BIN, "remote", "add", "gpubox", "-"], stdin=slave, stdout=subprocess.PIPE,
                                stderr=slave, env=self.env(chome, None))
        os.close(slave)
        try:
            shown = read_terminal(master, proc, until=b"it is not shown", deadline=READY_DEADLINE)
            self.assertIn(b"it is not shown", shown)
            os.write(master, provider.link.encode() + b"\n")
            shown += read_terminal(master, proc)
            out, _ = proc.communicate(timeout=CMD_TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            os.close(master)
        self.assertEqual(proc.returncode, 0, shown)
        self.assertIn(provider.peer, out.decode())
        self.assertNotIn(secret.encode(), shown, "the pasted secret was echoed")
        self.assertEqual(self.info(chome, "gpubox")["grant"]["id"], provider.grant)

    def test_bad_remote_name(self):
        home = self.new_home("consumer")
        self.fails(home, "remote", "add", "bad name/..", GOOD, contains="bad remote name")
        self.assertEqual(json.loads(self.ok(home, "remote", "list", "--json").stdout), [])


class Identity(E2ETestCase):
    def test_id_is_stable_and_private(self):
        home, other = self.new_home("a"), self.new_home("b")
        first = self.peer_id(home)
        self.assertEqual(len(first), 32)
        self.assertRegex(first, BASE32_RE)
        self.assertEqual(self.peer_id(home), first)
        as_json = json.loads(self.ok(home, "id", "--json").stdout)
        self.assertEqual(as_json["peer_id"], first)
        self.assertEqual(os.path.realpath(as_json["state_dir"]), os.path.realpath(home))
        pem = os.path.join(home, "identity.pem")
        self.assertEqual(stat.S_IMODE(os.stat(pem).st_mode), 0o600)
        self.assertEqual(stat.S_IMODE(os.stat(home).st_mode) & 0o077, 0)
        self.assertNotEqual(self.peer_id(other), first)

    def test_fresh_home_is_created(self):
        home = os.path.join(self.tmp, "not", "yet", "there")
        peer = self.peer_id(home)
        self.assertRegex(peer, BASE32_RE)
        self.assertTrue(os.path.exists(os.path.join(home, "identity.pem")))


class Help(E2ETestCase):
    EXPECT = {
        ("share",): ["--expires", "--max-uses", "--max-sessions", "--bind-first", "--listen", "--serve-only",
                     "--json", "--label"],
        ("info",): ["--json", "--timeout", "--watch", "LINK"],
        ("links",): ["--json", "--all"],
        ("revoke",): ["LINK-ID", "--all", "--json"],
        ("sessions",): ["--json"],
        ("kick",): ["SESSION"],
        ("log",): ["--json", "--since"],
        ("remote",): ["add", "list", "remove"],
        ("remote", "add"): ["NAME", "LINK", "stdin"],
        ("gpus",): ["--json"],
        ("id",): ["--json", "PeerId"],
    }

    def test_help(self):
        home = self.new_home()
        top = self.ok(home, "--help")
        for cmd in ("share", "info", "links", "revoke", "log", "remote", "gpus", "id"):
            self.assertIn(cmd, top.stdout)
        for args, words in self.EXPECT.items():
            with self.subTest(" ".join(args)):
                cp = self.ok(home, *args, "--help")
                for w in words:
                    self.assertIn(w, cp.stdout, "`runsnack %s --help` should mention %s" % (" ".join(args), w))

    def test_usage_errors(self):
        home = self.new_home()
        cp = self.run_cli(home)
        self.assertNotEqual(cp.returncode, 0)
        cp = self.run_cli(home, "share", "--no-such-option")
        self.assertNotEqual(cp.returncode, 0)
        self.assertIn("--no-such-option", cp.stderr)
        self.fails(home, "share", "--listen", "127.0.0.1:99999", contains="bad --listen")
        self.fails(home, "share", "--listen", "127.0.0.1:0", "--expires", "soon", contains="soon")
        self.fails(home, "log", "--since", "yesterday", contains="--since")


class Manners(E2ETestCase):
    """What a new user types first (issue 17): help, typos, numbers, GPUs that are not there."""

    def test_bare_and_help(self):
        home = self.new_home()
        bare = self.run_cli(home)
        self.assertNotEqual(bare.returncode, 0)
        self.assertIn("share", bare.stderr)
        self.assertIn("info", bare.stderr)
        self.assertNotIn("A subcommand is required", bare.stderr)
        top = self.ok(home, "help")
        for cmd in ("share", "info", "links", "revoke", "sessions", "kick"):
            self.assertIn(cmd, top.stdout)
        share = self.ok(home, "help", "share")
        self.assertIn("--expires", share.stdout)
        self.assertIn("--max-uses", share.stdout)
        self.assertIn("add", self.ok(home, "help", "remote").stdout)
        self.assertIn("NAME", self.ok(home, "help", "remote", "add").stdout)
        cp = self.run_cli(home, "help", "shar")
        self.assertEqual(cp.returncode, 2)
        self.assertIn("did you mean `share`", cp.stderr)

    def test_unknown_command_suggests_the_nearest(self):
        home = self.new_home()
        for typo, meant in (("shar", "share"), ("revok", "revoke"), ("lnks", "links"), ("sesions", "sessions")):
            with self.subTest(typo):
                cp = self.run_cli(home, typo)
                self.assertEqual(cp.returncode, 2)
                self.assertIn("'%s' is not a command" % typo, cp.stderr)
                self.assertIn("did you mean `runsnack %s`?" % meant, cp.stderr)
                self.assertEqual(len(cp.stderr.strip().splitlines()), 1, cp.stderr)
        cp = self.run_cli(home, "xyzzyplugh")
        self.assertEqual(cp.returncode, 2)
        self.assertNotIn("did you mean", cp.stderr)
        self.assertIn("runsnack help", cp.stderr)

    def test_numeric_errors_in_words(self):
        home = self.new_home()
        # (Values that an older runsnack took, and then served, are in test_grants.Terms.test_max_uses_range.)
        for args, words in ((("share", "--max-uses", "0"), "1 to 1000000"), (("share", "--max-uses", "2.5"), "1 to 1000000"),
                            (("share", "--max-sessions", "-3"), "1 or more"),
                            (("share", "--cpu-hours", "-1"), "0 or more"), (("log", "--prune", "--keep", "-5"), "0 or more")):
            with self.subTest(" ".join(args)):
                cp = self.run_cli(home, *args)
                self.assertEqual(cp.returncode, 2, cp.stderr)
                self.assertIn(words, cp.stderr)
                self.assertIsNone(re.search(r"\d{12}", cp.stderr), "a huge number in: %r" % cp.stderr)

    def test_gpu_the_machine_lacks_is_refused(self):
        home = self.new_home()
        no_nvml = {"RUNSNACK_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1"}
        for gpu in ("0", "7", "0,1"):
            with self.subTest(gpu):
                self.fails(home, "share", "--json", "--listen", "127.0.0.1:0", "--gpu", gpu, contains="no NVIDIA GPU",
                           env_extra=no_nvml)
        self.assertEqual(self.links(home, all=True), [], "a refused share must not make a link")
        fake = os.environ.get("RUNSNACK_FAKE_NVML")
        if fake:  # the stand-in NVML built with gpu_test: GPUs 0 and 1
            line = self.fails(home, "share", "--json", "--listen", "127.0.0.1:0", "--gpu", "7", contains="no GPU 7",
                              env_extra={"RUNSNACK_NVML_LIBRARY": fake})
            self.assertIn("0, 1", line)

    def test_share_status_codes_only_on_a_terminal(self):
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        human = self.start(phome, "share", "--listen", "127.0.0.1:0", "--no-qr", name="human")
        self.poll_until(lambda: human.lines, 30, "the link on stdout")
        link = human.lines[0].strip()
        self.assertTrue(link.startswith("runsnack://"), human.lines)
        self.info(chome, link)
        self.poll_until(lambda: "- session" in human.stderr(), 30, "the session lines on stderr")
        self.assertIn("+ session", human.stderr())
        self.assertNotIn("\x1b", human.stderr(), "terminal control codes written to a file")
        self.assertNotIn("\r", human.stderr())


if __name__ == "__main__":
    unittest.main()
