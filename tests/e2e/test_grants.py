"""Authorization end to end: pinned provider key, secret proof, grant terms, revocation."""

import datetime
import json
import os
import signal
import sqlite3
import time
import unittest

from harness import (BIN, E2ETestCase, READY_DEADLINE, link_secret, random_secret, replace_query_param, replace_secret,
                     split_link)


class ProviderKey(E2ETestCase):
    def test_wrong_peer_id_refused_before_auth(self):
        phome, chome, other = self.new_home("provider"), self.new_home("consumer"), self.new_home("other")
        other_id = self.peer_id(other)
        provider = self.start_provider(phome)
        self.assertNotEqual(other_id, provider.peer)
        forged = replace_query_param(provider.link, "peer", other_id)
        self.assertEqual(split_link(forged)["peer"], other_id)

        line = self.fails(chome, "info", "--json", forged, contains="does not match")
        self.assertIn(other_id, line)          # what the link says
        self.assertIn(provider.peer, line)     # what the provider presented

        def connect_refused():
            return [e for e in self.audit(phome) if e["kind"] == "connect" and e["decision"] == "refuse"]
        refusals = self.poll_until(connect_refused, 20, "a connect refusal in the provider's audit log")
        self.assertIn("TLS", refusals[0]["reason"])
        events = self.audit(phome)
        self.assertEqual([e for e in events if e["kind"] == "auth"], [], "no secret proof may be sent: %r" % events)
        self.assertEqual(self.grant_row(phome, provider.grant)["uses"], 0)
        self.assertFalse(provider.events_named("session_open"))


class Secret(E2ETestCase):
    def test_wrong_secret(self):
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        consumer_id = self.peer_id(chome)
        provider = self.start_provider(phome)
        self.info(chome, provider.link)  # one good use first
        secret = link_secret(provider.link)
        wrong = random_secret()
        self.assertEqual(len(wrong), len(secret))
        self.assertNotEqual(wrong, secret)
        bad = replace_secret(provider.link, wrong)

        self.fails(chome, "info", "--json", bad, contains="wrong secret")
        events = self.audit(phome)
        refused = [e for e in events if e["kind"] == "auth" and e["decision"] == "refuse"]
        self.assertEqual(len(refused), 1, events)
        self.assertIn("wrong secret", refused[0]["reason"])
        self.assertEqual(refused[0]["peer"], consumer_id)
        self.assertEqual(refused[0]["grant_id"], provider.grant)
        self.assertNotIn(wrong, str(events))
        self.assertNotIn(secret, str(events))
        self.assertEqual(self.grant_row(phome, provider.grant)["uses"], 1)
        provider.wait_for(lambda e: e.get("event") == "refused" and "wrong secret" in e.get("reason", ""),
                          READY_DEADLINE, "a refused event")

    def test_refused_proof_stops_a_pipelined_run_and_cp(self):
        # run, cp, cuda, shell, workspaces and forward send their first request right behind the
        # grant proof, before its answer: a refused proof must still be reported as such, and
        # nothing sent behind it may run or land.
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        provider = self.start_provider(phome, "--allow", "run,cp,cuda")
        bad = replace_secret(provider.link, random_secret())
        work = self.new_home("work")
        with open(os.path.join(work, "f.txt"), "w") as f:
            f.write("x")
        self.fails(chome, "run", bad, "--no-sync", "--", "sh", "-c", "echo ran > pipelined.txt", contains="wrong secret")
        self.fails(chome, "run", bad, "--sync", work, "--", "true", contains="wrong secret")
        self.fails(chome, "cp", bad, os.path.join(work, "f.txt"), "remote:f.txt", contains="wrong secret")
        self.fails(chome, "workspaces", bad, contains="wrong secret")
        self.fails(chome, "forward", bad, "0:1", contains="wrong secret")
        # cuda asks whether the provider offers CUDA first; its shim folder need only be found.
        shim = self.new_home("shim")
        open(os.path.join(shim, "libcuda.so.1"), "w").close()
        self.fails(chome, "cuda", bad, "--", "true", contains="wrong secret", env_extra={"RUNSNACK_CUDA_LIBDIR": shim})
        # Said once, by the command: not also as a warning of the transport under it.
        cp = self.run_cli(chome, "shell", bad)
        self.assertEqual(cp.returncode, 1, cp.stderr)
        self.assertEqual([l for l in cp.stderr.splitlines() if l.strip()],
                         ["runsnack: the provider refused: wrong secret: the link is damaged or not this provider's"])
        events = self.audit(phome)
        refused = [e for e in events if e["kind"] == "auth" and e["decision"] == "refuse"]
        # (Repeated refusals of one peer share an audit record.)
        self.assertTrue(refused and all("wrong secret" in e["reason"] for e in refused), events)
        self.assertEqual([e for e in events if e["kind"] not in ("auth", "connect")], [], events)
        workspaces = os.path.join(phome, "workspaces")
        self.assertFalse(os.path.isdir(workspaces) and any(os.scandir(workspaces)), "a refused consumer got a workspace")
        self.assertEqual(self.grant_row(phome, provider.grant)["uses"], 0)
        # The right secret, the same way: runs.
        cp = self.run_cli(chome, "run", provider.link, "--no-sync", "--", "sh", "-c", "echo ran")
        self.assertEqual((cp.returncode, cp.stdout.strip()), (0, "ran"), cp.stderr)

    def test_unknown_grant(self):
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        provider = self.start_provider(phome)
        other_grant = "a" * 10 if provider.grant != "a" * 10 else "b" * 10
        bad = provider.link.replace("/g/" + provider.grant, "/g/" + other_grant)
        self.fails(chome, "info", "--json", bad, contains="unknown link")


class Terms(E2ETestCase):
    def test_expired_link(self):
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        # 8s: expiry is stored in whole seconds, so the link may live only 7s, and the first use
        # must fit in that on a sanitizer build on a loaded CI machine (3s was seen to be too short).
        provider = self.start_provider(phome, "--expires", "8s")
        self.assertIsNotNone(provider.ready["expires"])
        info = self.info(chome, provider.link)
        self.assertEqual(info["grant"]["expires"], provider.ready["expires"])
        time.sleep(8.5)
        self.fails(chome, "info", "--json", provider.link, contains="expired")
        self.assertEqual(self.grant_row(phome, provider.grant)["state"], "expired")
        self.assertEqual([g for g in self.links(phome) if g["id"] == provider.grant], [])
        refused = [e for e in self.audit(phome) if e["kind"] == "auth" and e["decision"] == "refuse"]
        self.assertTrue(refused and "expired" in refused[-1]["reason"], refused)

    def test_expiry_ends_live_session(self):
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        provider = self.start_provider(phome, "--expires", "8s")
        a = self.start(chome, "info", "--watch", "1", "--json", provider.link, name="consumer-a")
        a.wait_for(lambda e: "grant" in e, READY_DEADLINE, "the first report")
        rc = a.wait(25)
        self.assertIsNotNone(rc, "the session outlived the link's expiry by far: %s" % a.stderr())
        self.assertNotEqual(rc, 0)
        self.assertIn("the provider ended this session (link expired)", a.stderr())
        closed = provider.wait_for(lambda e: e.get("event") == "session_closed", READY_DEADLINE, "session_closed")
        self.assertIn("expired", closed["reason"])

    def test_max_uses_counts_people_not_connections(self):
        """Issue 39: --max-uses 2 lets two consumers (identities) in, each as often as it likes (info, run,
        reconnects); the third is refused and told what to do; `links` says what is counted and what is left."""
        phome, a, b, c = (self.new_home(n) for n in ("provider", "a", "b", "c"))
        provider = self.start_provider(phome, "--max-uses", "2", "--allow", "run")
        for n, home in enumerate((a, b), start=1):
            for _ in range(5):
                info = self.info(home, provider.link)
            cp = self.run_cli(home, "run", provider.link, "--no-sync", "--", "sh", "-c", "echo ran")
            self.assertEqual((cp.returncode, cp.stdout.strip()), (0, "ran"), cp.stderr)
            self.assertEqual((info["grant"]["uses"], info["grant"]["max_uses"], info["grant"]["uses_left"]),
                             (n, 2, 2 - n))
        line = self.fails(c, "info", "--json", provider.link, contains=["2", "ask the provider for a new link"])
        self.assertNotIn("used up", line)
        self.fails(c, "run", provider.link, "--no-sync", "--", "true", contains="ask the provider for a new link")
        # The two who came first still get in, again and again.
        for home in (a, b):
            self.assertEqual(self.info(home, provider.link)["grant"]["uses"], 2)
        row = self.grant_row(phome, provider.grant, all=False)  # still listed: it is not dead
        self.assertEqual((row["uses"], row["max_uses"], row["uses_left"], row["state"]), (2, 2, 0, "full"))
        self.assertEqual(row["connections"], 2 * (5 + 1) + 2)
        table = self.ok(phome, "links").stdout.splitlines()
        self.assertEqual(table[0].split()[:5], ["ID", "STATE", "CONSUMERS", "LEFT", "CONNS"])
        self.assertEqual([l.split()[1:5] for l in table if l.startswith(provider.grant)], [["full", "2/2", "0", "14"]])
        refused = [e for e in self.audit(phome) if e["kind"] == "auth" and e["decision"] == "refuse"]
        self.assertEqual(len(refused), 2, refused)
        self.assertEqual({e["peer"] for e in refused}, {self.peer_id(c)})

    def test_max_uses_range(self):
        """--max-uses takes 1 to 1000000: a huge number is refused with the range, not clamped."""
        phome = self.new_home("provider")
        for value in ("99999999999999999999", "1000001", "0", "-1", "1e3", "two"):
            with self.subTest(value):
                cp = self.run_cli(phome, "share", "--json", "--listen", "127.0.0.1:0", "--max-uses", value)
                self.assertEqual(cp.returncode, 2, cp.stderr)
                self.assertIn("--max-uses", cp.stderr)
                self.assertIn("1 to 1000000", cp.stderr)
        self.assertEqual(self.links(phome, all=True), [])
        provider = self.start_provider(phome, "--max-uses", "1000000")
        self.assertEqual(self.grant_row(phome, provider.grant)["max_uses"], 1000000)
        table = self.ok(phome, "links").stdout.splitlines()
        self.assertEqual([l.split()[1:5] for l in table if l.startswith(provider.grant)],
                         [["active", "0/1000000", "1000000", "0"]])
        # What is counted, in share's --help and in what share says when it makes the link.
        self.assertRegex(self.ok(phome, "share", "--help").stdout, r"(?i)--max-uses[^\n]*\n?[^\n]*consumers")
        human = self.start(phome, "share", "--listen", "127.0.0.1:0", "--no-qr", "--max-uses", "3", name="human")
        self.poll_until(lambda: "consumers" in human.stderr(), READY_DEADLINE, "share's note on --max-uses")
        self.assertIn("the first 3 consumers", human.stderr())

    def test_max_sessions(self):
        phome, a_home, b_home = self.new_home("provider"), self.new_home("a"), self.new_home("b")
        provider = self.start_provider(phome, "--max-sessions", "1")
        a = self.start(a_home, "info", "--watch", "1", "--json", provider.link, name="consumer-a")
        first = a.wait_for(lambda e: "grant" in e, READY_DEADLINE, "A's first report")
        self.assertEqual(first["grant"]["max_sessions"], 1)

        self.fails(b_home, "info", "--json", provider.link, contains="too many sessions")
        self.assertTrue(a.alive(), "A's session must survive B's refusal: %s" % a.stderr())

        a.signal(signal.SIGTERM)
        self.assertIsNotNone(a.wait(20), "A did not exit on SIGTERM")

        def b_gets_in():
            cp = self.run_cli(b_home, "info", "--json", provider.link)
            return cp if cp.returncode == 0 else None
        self.poll_until(b_gets_in, 30, "B admitted after A left", interval=0.5)

    def test_bind_first(self):
        phome, a_home, b_home = self.new_home("provider"), self.new_home("a"), self.new_home("b")
        a_id = self.peer_id(a_home)
        provider = self.start_provider(phome, "--bind-first")
        self.info(a_home, provider.link)
        row = self.grant_row(phome, provider.grant)
        self.assertTrue(row["bind_first"])
        self.assertEqual(row["bound_peer"], a_id)
        self.fails(b_home, "info", "--json", provider.link, contains="bound to another consumer")
        info = self.info(a_home, provider.link)
        self.assertEqual((info["grant"]["uses"], info["grant"]["connections"]), (1, 2))


class DefaultExpiry(E2ETestCase):
    """New links live 24 h unless --expires says otherwise (issue 17); `--expires never` opts out."""

    def test_default_lifetime_stated_and_never_opts_out(self):
        phome = self.new_home("provider")
        provider = self.start_provider(phome)
        self.assertIsNotNone(provider.ready["expires"], "a new link must expire by default: %r" % provider.ready)
        expires = datetime.datetime.strptime(provider.ready["expires"], "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc)
        left = (expires - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
        self.assertTrue(23 * 3600 < left <= 24 * 3600 + 60, "expires in %.0f s, not about 24 h" % left)
        self.assertEqual(self.grant_row(phome, provider.grant)["expires"], provider.ready["expires"])
        provider.stop()

        forever = self.start_provider(phome, "--expires", "never", name="forever")
        self.assertIsNone(forever.ready["expires"])
        self.assertIsNone(self.grant_row(phome, forever.grant)["expires"])
        forever.stop()

        # A person reads when and how to change it.
        human = self.start(phome, "share", "--listen", "127.0.0.1:0", "--no-qr", name="human")
        self.poll_until(lambda: "Sharing as" in human.stderr(), 30, "share's human output")
        text = human.stderr()
        self.assertIn("expires", text)
        self.assertIn("24h", text)
        self.assertIn("--expires never", text)
        human.stop()


class LinksAndRevoke(E2ETestCase):
    def make_links(self, home, n, *args):
        out = []
        for i in range(n):
            p = self.start_provider(home, *args, name="maker%d" % i)
            out.append((p.grant, p.link))
            p.stop()  # right after "ready" a SIGTERM may come before share's handler: no exit status check
        return out

    def test_revoke_several_all_and_pasted_link(self):
        phome = self.new_home("provider")
        (a, _), (b, _), (c, c_link), (d, _) = self.make_links(phome, 4)
        cp = self.ok(phome, "revoke", a, b)
        self.assertIn("revoked " + a, cp.stdout)
        self.assertIn("revoked " + b, cp.stdout)
        # A pasted link: revoked by its id, and never printed back (it holds the secret).
        secret = link_secret(c_link)
        cp = self.ok(phome, "revoke", c_link)
        self.assertIn("revoked " + c, cp.stdout)
        self.assertNotIn(secret, cp.stdout + cp.stderr)
        self.assertNotIn("runsnack://", cp.stdout + cp.stderr)
        cp = self.ok(phome, "revoke", "-", input=c_link + "\n")  # from stdin too (idempotent)
        self.assertNotIn(secret, cp.stdout + cp.stderr)
        damaged = replace_query_param(c_link, "peer", "zz" + split_link(c_link)["peer"]) + "X"
        line = self.fails(phome, "revoke", damaged, contains="does not parse")
        self.assertNotIn(secret, line)
        self.assertEqual({g["id"]: g["state"] for g in self.links(phome, all=True)},
                         {a: "revoked", b: "revoked", c: "revoked", d: "active"})
        # Unknown ids fail; the known ones given with them are still revoked.
        self.fails(phome, "revoke", "zzzzzzzzzz", contains="no link with id")
        cp = self.ok(phome, "revoke", "--all", "--json")
        self.assertEqual(json.loads(cp.stdout)["revoked"], [d])
        self.assertEqual(self.links(phome), [])
        revokes = [e["grant_id"] for e in self.audit(phome) if e["kind"] == "revoke"]
        self.assertEqual(sorted(set(revokes)), sorted([a, b, c, d]))
        self.fails(phome, "revoke", contains="--all")

    def test_links_shows_label_and_live_sessions(self):
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        provider = self.start_provider(phome, "--label", "for Ana", "--max-sessions", "5", "--max-uses", "9")
        row = self.grant_row(phome, provider.grant)
        self.assertEqual(row["live_sessions"], 0)
        watcher = self.start(chome, "info", "--watch", "1", "--json", provider.link, name="watcher")
        watcher.wait_for(lambda e: "grant" in e, READY_DEADLINE, "the first report")
        self.assertEqual(self.grant_row(phome, provider.grant)["live_sessions"], 1)
        lines = self.ok(phome, "links").stdout.splitlines()
        self.assertIn("LABEL", lines[0])
        mine = [l for l in lines if l.startswith(provider.grant)]
        self.assertEqual(len(mine), 1, lines)
        cols = mine[0].split()
        self.assertEqual(cols[2:5], ["1/9", "8", "1"], mine[0])   # consumers / --max-uses, left, connections
        self.assertEqual(cols[5], "1/5", mine[0])   # live sessions / the most at once
        self.assertIn("for Ana", mine[0])
        watcher.stop()
        self.poll_until(lambda: self.grant_row(phome, provider.grant)["live_sessions"] == 0, 30,
                        "the session to leave `links`")


class SessionsAndKick(E2ETestCase):
    def test_sessions_lists_and_kick_ends_one(self):
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        consumer_id = self.peer_id(chome)
        provider = self.start_provider(phome)
        self.assertEqual(json.loads(self.ok(phome, "sessions", "--json").stdout), [])
        watcher = self.start(chome, "info", "--watch", "1", "--json", provider.link, name="watcher")
        watcher.wait_for(lambda e: "grant" in e, READY_DEADLINE, "the first report")
        opened = provider.wait_for(lambda e: e.get("event") == "session_open", READY_DEADLINE, "session_open")
        live = json.loads(self.ok(phome, "sessions", "--json").stdout)
        self.assertEqual(len(live), 1, live)
        s = live[0]
        self.assertEqual(s["session"], opened["session"])
        self.assertEqual((s["grant"], s["peer"], s["path"]), (provider.grant, consumer_id, "direct"))
        self.assertEqual(s["address"], opened["address"])
        self.assertIn("info", s["services"])
        self.assertTrue(s["since"].endswith("Z"))
        human = self.ok(phome, "sessions").stdout
        self.assertIn(s["session"], human)
        self.assertIn(consumer_id[:12], human)

        self.fails(phome, "kick", "nosuchsession", contains="no live session")
        cp = self.ok(phome, "kick", s["session"])
        self.assertIn("kicked", cp.stdout)
        rc = watcher.wait(20)
        self.assertIsNotNone(rc, "the kicked session is still open: %s" % watcher.stderr())
        self.assertNotEqual(rc, 0)
        closed = provider.wait_for(lambda e: e.get("event") == "session_closed", READY_DEADLINE, "session_closed")
        self.assertIn("kick", closed["reason"])
        events = self.audit(phome)
        kicks = [e for e in events if e["kind"] == "kick"]
        self.assertEqual(len(kicks), 1, events)
        self.assertEqual((kicks[0]["grant_id"], kicks[0]["peer"]), (provider.grant, consumer_id))
        self.assertEqual(kicks[0]["detail"]["session"], s["session"])
        self.poll_until(lambda: json.loads(self.ok(phome, "sessions", "--json").stdout) == [], 20, "no live sessions")
        # The link itself still works.
        self.assertEqual(self.info(chome, provider.link)["grant"]["id"], provider.grant)


# Burns CPU for a while, holds 64 MB, then waits for Ctrl-C (the consumer's SIGINT ends it).
BURN_AND_HOLD = """
import time
block = b'x' * (64 << 20)
end = time.time() + 1.5
n = 0
while time.time() < end:
    n += 1
print('ready', flush=True)
time.sleep(600)
"""


class SessionCommands(E2ETestCase):
    """`runsnack sessions` shows each session's running commands with what they use now."""

    def setUp(self):
        super().setUp()
        self.phome, self.chome = self.new_home("provider"), self.new_home("consumer")
        self.provider = self.start_provider(self.phome, "--allow", "run,cp")
        self.work = self.new_home("work")

    def sessions(self, env_extra=None):
        return json.loads(self.ok(self.phome, "sessions", "--json", env_extra=env_extra).stdout)

    def command_rows(self):
        db = sqlite3.connect(os.path.join(self.phome, "runsnack.db"))
        try:
            return db.execute("SELECT session_id, command FROM session_commands").fetchall()
        finally:
            db.close()

    def start_run(self, *cmd):
        return self.start(self.chome, "run", self.provider.link, "--sync", self.work, "--", *cmd, name="run")

    def wait_output(self, proc, text):
        self.poll_until(lambda: any(text in l for l in proc.lines) or not proc.alive(), 60, "%r from the command" % text)
        self.assertTrue(any(text in l for l in proc.lines), "%r %s" % (proc.lines, proc.stderr()))

    def test_running_command_with_cpu_and_memory_then_gone(self):
        run = self.start_run("python3", "-c", BURN_AND_HOLD)
        self.wait_output(run, "ready")
        no_nvml = {"RUNSNACK_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1"}
        live = self.sessions(no_nvml)
        self.assertEqual(len(live), 1, live)
        self.assertIn("run", live[0]["services"])
        commands = live[0]["commands"]
        self.assertEqual(len(commands), 1, commands)
        c = commands[0]
        self.assertTrue(c["command"].startswith("python3 -c \nimport time\nblock = b'x'"), c)
        self.assertTrue(c["since"].endswith("Z"), c)
        self.assertGreater(c["pid"], 0)
        self.assertGreaterEqual(c["cpu_seconds"], 1.0, c)       # it burned 1.5 s before "ready"
        self.assertGreaterEqual(c["memory_bytes"], 60 << 20, c)  # and holds 64 MB
        self.assertIsNone(c["gpu_memory_bytes"], c)              # no NVML: unknown, not 0
        self.assertEqual(live[0]["unlisted_commands"], 0)

        human = self.ok(self.phome, "sessions", env_extra=no_nvml).stdout
        self.assertIn("COMMAND", human)
        line = [l for l in human.splitlines() if "python3 -c" in l]
        self.assertEqual(len(line), 1, human)
        self.assertTrue(line[0].startswith("    "), human)      # indented under its session
        self.assertIn(str(c["pid"]), line[0])
        self.assertIn(" MB", line[0])

        # GPU memory per process through NVML (a stand-in library): the command's processes only.
        fake = os.path.join(os.path.dirname(BIN), "..", "gpu", "librunsnack_fake_nvml.so")
        if os.path.exists(fake):
            with_gpu = self.sessions({"RUNSNACK_NVML_LIBRARY": fake,
                                      "FAKE_NVML_PROCESSES": "%d:123456789,1:999" % c["pid"]})
            self.assertEqual(with_gpu[0]["commands"][0]["gpu_memory_bytes"], 123456789)
            idle = self.sessions({"RUNSNACK_NVML_LIBRARY": fake, "FAKE_NVML_PROCESSES": "1:999"})
            self.assertEqual(idle[0]["commands"][0]["gpu_memory_bytes"], 0)

        run.signal(signal.SIGINT)  # Ctrl-C: the command ends
        self.assertIsNotNone(run.wait(30), "run did not end after Ctrl-C")
        self.poll_until(lambda: self.command_rows() == [], 20, "the command's row to go")
        self.assertEqual([s for s in self.sessions() if s["commands"]], [])

    def test_hostile_command_line_is_cut_and_escaped_and_kick_ends_it(self):
        # 100 kB of command line with terminal control sequences in it.
        junk = "\x1b]0;owned\x07\x1b[2J" + "A" * 50000
        run = self.start_run("sh", "-c", "echo ready; exec sleep 600", junk, "B" * 50000)
        self.wait_output(run, "ready")
        live = self.poll_until(lambda: [s for s in self.sessions() if s["commands"]], 20, "the command")
        c = live[0]["commands"][0]
        self.assertLessEqual(len(c["command"].encode()), 256, c)
        self.assertTrue(c["command"].startswith("sh -c echo ready; exec sleep 600 \x1b]0;owned"), c)
        self.assertTrue(c["command"].endswith("\u2026"), c)
        [(_, stored)] = self.command_rows()
        self.assertLessEqual(len(stored.encode()), 256)
        human = self.ok(self.phome, "sessions").stdout
        self.assertNotIn("\x1b", human)   # no raw escape reaches the terminal
        self.assertIn("\\x1b]0;owned", human)

        self.ok(self.phome, "kick", live[0]["session"])
        self.assertIsNotNone(run.wait(30), "the kicked session's run did not end: %s" % run.stderr())
        self.poll_until(lambda: self.command_rows() == [], 20, "the kicked session's command to go")
        kicks = [e for e in self.audit(self.phome) if e["kind"] == "kick"]
        self.assertEqual(len(kicks), 1)


class Revocation(E2ETestCase):
    def test_revoke_ends_live_session(self):
        phome, a_home, b_home = self.new_home("provider"), self.new_home("a"), self.new_home("b")
        provider = self.start_provider(phome)
        a = self.start(a_home, "info", "--watch", "1", "--json", provider.link, name="consumer-a")
        a.wait_for(lambda e: "grant" in e, READY_DEADLINE, "A's first report")
        provider.wait_for(lambda e: e.get("event") == "session_open", READY_DEADLINE, "session_open")

        started = time.monotonic()
        cp = self.ok(phome, "revoke", provider.grant)
        revoked_at = time.monotonic()
        self.assertIn("revoked " + provider.grant, cp.stdout)
        rc = None
        while rc is None and time.monotonic() - revoked_at < 10:
            rc = a.popen.poll()
            time.sleep(0.01)
        exited_at = time.monotonic()
        self.assertIsNotNone(rc, "A still running 10 s after the revoke: %s" % a.stderr())
        print("\n  revoke -> consumer exit: %.2f s (revoke command took %.2f s)" %
              (exited_at - revoked_at, revoked_at - started), flush=True)
        self.assertNotEqual(rc, 0)
        a.wait(10)
        self.assertIn("the provider ended this session (link revoked)", a.stderr())

        closed = provider.wait_for(lambda e: e.get("event") == "session_closed", READY_DEADLINE, "session_closed")
        self.assertIn("revoked", closed["reason"])

        self.fails(b_home, "info", "--json", provider.link, contains="revoked")
        self.fails(a_home, "info", "--json", provider.link, contains="revoked")
        row = self.grant_row(phome, provider.grant, all=True)
        self.assertEqual(row["state"], "revoked")
        self.assertTrue(row["revoked"])
        events = self.audit(phome)
        self.assertTrue([e for e in events if e["kind"] == "revoke" and e["grant_id"] == provider.grant], events)
        closes = [e for e in events if e["kind"] == "session_close"]
        self.assertTrue(closes and "revoked" in closes[0]["reason"], events)

    def test_revoke_unknown_grant(self):
        phome = self.new_home("provider")
        self.fails(phome, "revoke", "zzzzzzzzzz", contains="no link with id")


class SessionEndTold(E2ETestCase):
    """Issue 39 item 6: a provider that ends a session says why inside it (an authenticated goodbye,
    session/goodbye.hpp), and the consumer tells its user in one line, with what to do next, and its
    --json in a field `ended`."""

    def setUp(self):
        super().setUp()
        self.cli_cwd = self.new_home("work")  # the folder `run --no-sync` names its workspace after

    def start_waiting_run(self, home, link, name="run"):
        """A `run --json` that waits until the provider ends its session."""
        proc = self.start(home, "run", link, "--no-sync", "--json", "--", "sh", "-c", "echo ready; exec sleep 600",
                          name=name)
        self.poll_until(lambda: "ready" in proc.lines or not proc.alive(), READY_DEADLINE, "the remote command's start")
        self.assertIn("ready", proc.lines, proc.stderr())
        return proc

    def told(self, proc, to_stdout=False):
        """The consumer's exit: status 1, its one `runsnack:` line and its JSON `session_ended` event."""
        rc = proc.wait(30)
        self.assertIsNotNone(rc, "the consumer outlived its session: %s" % proc.stderr())
        self.assertEqual(rc, 1, proc.stderr())
        stderr = proc.stderr()
        lines = [l for l in stderr.splitlines() if l.startswith("runsnack: ")]
        self.assertEqual(len(lines), 1, stderr)
        events = proc.events() if to_stdout else [json.loads(l) for l in stderr.splitlines() if l.startswith("{")]
        ended = [e for e in events if e.get("event") == "session_ended"]
        self.assertEqual(len(ended), 1, (events, stderr))
        return lines[0], ended[0]

    def test_kicked(self):
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        provider = self.start_provider(phome, "--allow", "run")
        run = self.start_waiting_run(chome, provider.link)
        live = json.loads(self.ok(phome, "sessions", "--json").stdout)
        self.assertEqual(len(live), 1, live)
        self.ok(phome, "kick", live[0]["session"])
        line, ev = self.told(run)
        self.assertEqual(line, "runsnack: the provider ended this session (kicked); the link still works: run the "
                               "command again, or ask the provider why")
        self.assertEqual(ev["ended"], "kicked")
        self.assertIn("kick", ev["message"])

    def test_kick_is_audited_as_a_kick(self):
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        provider = self.start_provider(phome, "--allow", "run")
        run = self.start_waiting_run(chome, provider.link)
        session = json.loads(self.ok(phome, "sessions", "--json").stdout)[0]["session"]
        self.ok(phome, "kick", session)
        run.wait(30)
        closed = provider.wait_for(lambda e: e.get("event") == "session_closed", READY_DEADLINE, "session_closed")
        self.assertEqual(closed["ended"], "kicked")

        def close_record():
            return [e for e in self.audit(phome) if e["kind"] == "session_close" and e["detail"]["session"] == session]
        closes = self.poll_until(close_record, 20, "the session_close record")
        self.assertEqual(len(closes), 1, closes)
        self.assertEqual(closes[0]["detail"]["ended"], "kicked")
        self.assertIn("kick", closes[0]["reason"])
        # A session the consumer closes itself is told apart.
        self.info(chome, provider.link)
        consumer_closes = self.poll_until(
            lambda: [e for e in self.audit(phome) if e["kind"] == "session_close" and e["detail"]["session"] != session],
            20, "the info session's session_close record")
        self.assertEqual(consumer_closes[0]["detail"]["ended"], "consumer")

    def test_revoked(self):
        phome, chome, other = self.new_home("provider"), self.new_home("consumer"), self.new_home("other")
        provider = self.start_provider(phome, "--allow", "run")
        run = self.start_waiting_run(chome, provider.link)
        watcher = self.start(other, "info", "--watch", "1", "--json", provider.link, name="watcher")
        watcher.wait_for(lambda e: "grant" in e, READY_DEADLINE, "the first report")
        self.ok(phome, "revoke", provider.grant)
        for proc, to_stdout in ((run, False), (watcher, True)):
            line, ev = self.told(proc, to_stdout=to_stdout)
            self.assertEqual(line, "runsnack: the provider ended this session (link revoked); ask the provider for a "
                                   "new link")
            self.assertEqual(ev["ended"], "revoked")

    def test_expired(self):
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        # 8s: expiry is stored in whole seconds (see Terms.test_expired_link).
        provider = self.start_provider(phome, "--allow", "run", "--expires", "8s")
        run = self.start_waiting_run(chome, provider.link)
        line, ev = self.told(run)
        self.assertEqual(line, "runsnack: the provider ended this session (link expired); ask the provider for a "
                               "new link")
        self.assertEqual(ev["ended"], "expired")
        self.assertIn("expired at", ev["message"])

    def test_provider_stopped(self):
        # Ctrl-C and SIGTERM of `runsnack share` alike.
        for sig in (signal.SIGINT, signal.SIGTERM):
            with self.subTest(signal=sig.name):
                phome, chome = self.new_home(), self.new_home()
                provider = self.start_provider(phome, "--allow", "run", name="provider-" + sig.name)
                run = self.start_waiting_run(chome, provider.link, name="run-" + sig.name)
                provider.signal(sig)
                self.assertEqual(provider.wait(30), 0, provider.stderr())
                line, ev = self.told(run)
                self.assertEqual(line, "runsnack: the provider ended this session (it stopped sharing); run the "
                                       "command again once the provider shares again")
                self.assertEqual(ev["ended"], "provider_stopped")
                closes = [e for e in self.audit(phome) if e["kind"] == "session_close"]
                self.assertEqual([e["detail"]["ended"] for e in closes], ["provider_stopped"], closes)


if __name__ == "__main__":
    unittest.main()
