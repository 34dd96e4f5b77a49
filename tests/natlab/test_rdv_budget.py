#!/usr/bin/env python3
"""Relay budgets and the operator's key list against a real `runsnack rendezvous` on 127.0.0.1
(issue 37, finding 9: a provider key made on the spot relayed what it liked).

A relay pair is charged to its provider's key and to both sides' addresses; a spent budget closes
its pairs and refuses new relays with the reason, to both sides; `--relay-only-for FILE` /
`--relay-for PEERID` relay only for the keys the operator lists. The fake providers prove keys of
their own, made on the spot (rdv_wire.Ed25519Key, via `openssl`); loopback's 127.0.0.2 and up are
other addresses.

Run: RUNSNACK_BIN=build/dev/src/cli/runsnack python3 -m unittest -v test_rdv_budget
"""
import json, os, shutil, socket, subprocess, tempfile, threading, time, unittest

from rdv_wire import Ed25519Key, frame, provider_intro, read_msg, register

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("RUNSNACK_BIN") or os.path.join(REPO, "build", "dev", "src", "cli", "runsnack")
B32 = "abcdefghijklmnopqrstuvwxyz234567"
MIB = 1024 * 1024


def rand_id(n):
    return "".join(B32[b % 32] for b in os.urandom(n))


class RendezvousCase(unittest.TestCase):
    def start(self, *flags):
        """A rendezvous with `flags`; its stderr (the log) goes to self.log."""
        if not os.path.exists(BIN):
            self.skipTest(f"runsnack binary not found at {BIN}")
        self.tmp = tempfile.mkdtemp(prefix="rdv-budget-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.log = os.path.join(self.tmp, "rdv.log")
        env = dict(os.environ, RUNSNACK_HOME=os.path.join(self.tmp, "rdv"), RUNSNACK_LOG="warn")
        self.rdv = self.spawn([BIN, "rendezvous", "--listen", "127.0.0.1:0", "--json", *flags], env, self.log)
        line = self.rdv.stdout.readline()
        if not line:
            self.rdv.wait(10)
            with open(self.log) as f:
                self.fail(f"the rendezvous did not start with {flags}: {f.read()[-2000:]}")
        self.ready = json.loads(line)
        self.port = int(self.ready["listen"].rsplit(":", 1)[1])
        self.addr = ("127.0.0.1", self.port)

    def spawn(self, argv, env, log):
        """A process whose stdout we read and whose stderr goes to `log`; stopped at cleanup."""
        with open(log, "ab") as err:
            p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
        self.addCleanup(self.stop, p)
        return p

    def stop(self, p):
        p.stdout.close()
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def conn(self, source="127.0.0.1"):
        s = socket.create_connection(self.addr, timeout=5, source_address=(source, 0))
        self.addCleanup(s.close)
        return s

    def key(self):
        key = Ed25519Key()
        self.addCleanup(shutil.rmtree, key.dir, True)
        return key

    def provider(self, key):
        """An honest provider of `key`, registered; returns (socket, grant)."""
        grant = rand_id(10)
        p = register(self.addr, key, [grant])
        self.addCleanup(p.close)
        return p, grant

    def tokens(self, p, key, grant):
        """A consumer introduced to provider p: the provider's and the consumer's relay tokens."""
        c = self.conn()
        c.sendall(frame({"t": "connect", "peer": key.peer, "grant": grant, "candidates": []}))
        while True:
            m = read_msg(c)
            if m["t"] != "ping":
                break
            c.sendall(frame({"t": "pong", "n": m["n"]}))
        self.assertEqual(m["t"], "intro", m)
        return provider_intro(p)["token"], m["token"]

    def sides(self, token_p, token_c, source_p="127.0.0.1", source_c="127.0.0.1"):
        """Both relay sides presented; returns (provider side, consumer side, their first answers)."""
        a, b = self.conn(source_p), self.conn(source_c)
        a.sendall(frame({"t": "relay", "token": token_p, "side": "provider"}))
        time.sleep(0.1)  # parked first, as a real provider's side is
        b.sendall(frame({"t": "relay", "token": token_c, "side": "consumer"}))
        return a, b, read_msg(a, 10), read_msg(b, 10)

    def push(self, a, b, total):
        """Writes `total` bytes into a; returns what came out of b before the relay ended or went quiet."""
        def writer():
            chunk = os.urandom(64 * 1024)
            try:
                for _ in range(total // len(chunk)):
                    a.sendall(chunk)
            except OSError:
                pass
        t = threading.Thread(target=writer, daemon=True)
        t.start()
        got, deadline = 0, time.time() + 60
        b.settimeout(5)
        while time.time() < deadline:
            try:
                chunk = b.recv(256 * 1024)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            got += len(chunk)
        t.join(10)
        return got

    def rdv_log(self):
        with open(self.log, errors="replace") as f:
            return f.read()


class RelayBudgets(RendezvousCase):
    def test_self_made_key_stops_at_its_budget_and_is_refused_after(self):
        self.start("--relay-per-key", "2M", "--relay-per-address", "64M", "--max-relay-mbps", "0")
        self.assertEqual(self.ready["relay_per_key"], 2 * MIB)
        key = self.key()
        p, grant = self.provider(key)
        a, b, ok_a, ok_b = self.sides(*self.tokens(p, key, grant))
        self.assertEqual((ok_a["t"], ok_b["t"]), ("relay_ok", "relay_ok"))
        got = self.push(a, b, 32 * MIB)
        print(f"\nself-made key, --relay-per-key 2M: {got} bytes relayed of 32 MiB pushed")
        self.assertGreaterEqual(got, 2 * MIB - 64 * 1024, "the pair stopped well before its budget")
        self.assertLessEqual(got, 2 * MIB, f"the relay passed {got} bytes over a 2 MiB budget")
        # The same key's next relay is refused, with the reason, on both sides.
        a, b, m_a, m_b = self.sides(*self.tokens(p, key, grant))
        for m in (m_a, m_b):
            self.assertEqual(m["t"], "error", m)
            self.assertIn(f"relay budget of provider {key.peer} is spent", m["reason"])
            self.assertIn("2 MiB per 1h", m["reason"])
            self.assertIn("renews in", m["reason"])
        # Another key is not charged for it.
        other = self.key()
        p2, grant2 = self.provider(other)
        _, _, ok_a, ok_b = self.sides(*self.tokens(p2, other, grant2))
        self.assertEqual((ok_a["t"], ok_b["t"]), ("relay_ok", "relay_ok"))
        log = self.rdv_log()
        self.assertIn(f"relay for provider {key.peer[:12]} (127.0.0.1 <-> 127.0.0.1) closed after", log)
        self.assertIn("relay refused to 127.0.0.1: the relay budget of provider", log)

    def test_fresh_keys_from_one_address_share_its_budget(self):
        # Each key within its own 2 MiB; the address's 3 MiB stops the second key and refuses a third.
        self.start("--relay-per-key", "2M", "--relay-per-address", "3M", "--max-relay-mbps", "0")
        moved = []
        for _ in range(2):
            key = self.key()
            p, grant = self.provider(key)
            a, b, ok_a, ok_b = self.sides(*self.tokens(p, key, grant))
            self.assertEqual((ok_a["t"], ok_b["t"]), ("relay_ok", "relay_ok"))
            moved.append(self.push(a, b, 8 * MIB))
        print(f"\ntwo fresh keys from 127.0.0.1, 2M per key, 3M per address: {moved}")
        self.assertLessEqual(sum(moved), 3 * MIB)
        self.assertGreaterEqual(sum(moved), 3 * MIB - 128 * 1024)
        key = self.key()
        p, grant = self.provider(key)
        _, _, m_a, m_b = self.sides(*self.tokens(p, key, grant))
        for m in (m_a, m_b):
            self.assertEqual(m["t"], "error", m)
            self.assertIn("relay budget of address 127.0.0.1 is spent", m["reason"])
        # A side from another address whose pair includes 127.0.0.1 is refused too, and told why.
        token_p, token_c = self.tokens(p, key, grant)
        _, _, m_a, m_b = self.sides(token_p, token_c, source_p="127.0.0.2", source_c="127.0.0.1")
        self.assertEqual(m_a["t"], "error", m_a)
        self.assertEqual(m_b["t"], "error", m_b)
        self.assertIn("address 127.0.0.1", m_a["reason"])


class RelayOnlyForListedKeys(RendezvousCase):
    def setUp(self):
        self.listed, self.listed_too = self.key(), self.key()
        keys = os.path.join(tempfile.mkdtemp(prefix="rdv-keys-"), "relay-keys")
        self.addCleanup(shutil.rmtree, os.path.dirname(keys), True)
        with open(keys, "w") as f:
            f.write(f"# the operator's providers\n{self.listed.peer}  # gpu box\n\n")
        self.start("--relay-only-for", keys, "--relay-for", self.listed_too.peer, "--max-relay-mbps", "0")
        self.assertEqual(self.ready["relay_only_for"], 2)

    def test_unlisted_key_refused_listed_keys_relay(self):
        stranger = self.key()
        p, grant = self.provider(stranger)
        a, b, m_a, m_b = self.sides(*self.tokens(p, stranger, grant))
        for m in (m_a, m_b):
            self.assertEqual(m["t"], "error", m)
            self.assertIn("relays only for the provider keys its operator lists", m["reason"])
            self.assertIn(stranger.peer, m["reason"])
        # Nothing it writes goes anywhere.
        try:
            a.sendall(b"x" * 65536)
        except OSError:
            pass
        b.settimeout(2)
        try:
            self.assertEqual(b.recv(65536), b"")
        except (ConnectionResetError, socket.timeout):
            pass
        print("\nunlisted self-made key: 0 bytes relayed, refused")
        for key in (self.listed, self.listed_too):
            p, grant = self.provider(key)
            a, b, ok_a, ok_b = self.sides(*self.tokens(p, key, grant))
            self.assertEqual((ok_a["t"], ok_b["t"]), ("relay_ok", "relay_ok"))
            data = os.urandom(MIB)
            threading.Thread(target=a.sendall, args=(data,), daemon=True).start()
            got, deadline = b"", time.time() + 30
            b.settimeout(5)
            while len(got) < len(data) and time.time() < deadline:
                chunk = b.recv(65536)
                if not chunk:
                    break
                got += chunk
            self.assertEqual(got, data, "a listed key's pair did not relay its bytes intact")
        self.assertIn("relay refused to 127.0.0.1: this rendezvous relays only for", self.rdv_log())

    def test_a_real_provider_is_told_why(self):
        """`runsnack share` of an unlisted key: its relay side is refused and its log says why."""
        home = os.path.join(self.tmp, "provider")
        os.makedirs(home)
        plog = os.path.join(self.tmp, "provider.log")
        env = dict(os.environ, RUNSNACK_HOME=home, RUNSNACK_LOG="warn")
        share = self.spawn([BIN, "share", "--json", "--no-qr", "--no-port-mapping", "--listen", "127.0.0.1:0",
                            "--rendezvous", f"127.0.0.1:{self.port}"], env, plog)
        first = json.loads(share.stdout.readline())
        deadline = time.time() + 60
        while time.time() < deadline:
            ev = json.loads(share.stdout.readline())
            if ev.get("event") == "rendezvous" and ev["state"].startswith("registered"):
                break
        else:
            self.fail("the provider never registered")
        # A consumer's introduction: the provider opens its relay side at once, and is refused.
        c = self.conn()
        c.sendall(frame({"t": "connect", "peer": first["peer"], "grant": first["grant"], "candidates": []}))
        m = read_msg(c)
        if m["t"] == "ping":
            c.sendall(frame({"t": "pong", "n": m["n"]}))
            m = read_msg(c)
        self.assertEqual(m["t"], "intro", m)
        deadline, said = time.time() + 20, ""
        while time.time() < deadline:
            with open(plog, errors="replace") as f:
                said = f.read()
            if "rendezvous refused the relay" in said:
                break
            time.sleep(0.2)
        self.assertIn("rendezvous refused the relay", said)
        self.assertIn("relays only for the provider keys its operator lists", said)
        # The consumer's own side hears the same.
        r = self.conn()
        r.sendall(frame({"t": "relay", "token": m["token"], "side": "consumer"}))
        answer = read_msg(r, 10)
        self.assertEqual(answer["t"], "error", answer)
        self.assertIn("relays only for the provider keys its operator lists", answer["reason"])


if __name__ == "__main__":
    unittest.main()
