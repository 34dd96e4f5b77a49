"""Sharing end to end: the happy path, a provider restart, and hostile connections."""

import json
import os
import signal
import socket
import struct
import time
import unittest

from harness import (E2ETestCase, READY_DEADLINE, SHELL_SAFE_LINK_RE, free_port, random_secret, replace_query_param,
                     replace_secret, split_link)

INFO_KEYS = {"host", "gpus", "gpu_note", "grant", "provider", "path", "address", "setup_ms", "rtt_ms",
             "bandwidth_mbps"}
GRANT_KEYS = {"id", "uses", "max_uses", "uses_left", "connections", "max_sessions", "expires", "services", "state"}


class HappyPath(E2ETestCase):
    def test_info_probes_the_bandwidth_once_and_within_its_bound(self):
        """Issue 39 (10): an `info` moved ~500 MB on loopback for its bandwidth figure, and `--watch`
        probed again on every refresh. Now a probe stops at 16 MiB, and --watch probes once."""
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        provider = self.start_provider(phome)
        info = self.info(chome, provider.link)
        self.assertGreater(info["bandwidth_mbps"], 0)
        watch = self.start(chome, "info", provider.link, "--json", "--watch", "0.1", name="watch")
        figures = lambda: [e["bandwidth_mbps"] for e in watch.events() if "bandwidth_mbps" in e]
        self.poll_until(lambda: len(figures()) >= 4, 60, "four reports of --watch")
        watch.stop()
        self.assertEqual(len(set(figures())), 1, figures())  # measured once, shown again
        closed = lambda: [e for e in self.audit(phome) if e["kind"] == "session_close"]
        closes = self.poll_until(lambda: closed() if len(closed()) >= 2 else None, 30, "both sessions' close records")
        sent = [e["detail"]["bytes_out"] for e in closes]
        self.assertTrue(all(b < 20 * 1024 * 1024 for b in sent), sent)

    def test_info_round_trip(self):
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        consumer_id = self.peer_id(chome)
        provider = self.start_provider(phome)
        self.assertTrue(provider.link.startswith("runsnack://"), provider.link)
        self.assertEqual(provider.peer, self.peer_id(phome))
        self.assertEqual(split_link(provider.link)["peer"], provider.peer)
        self.assertIn("/g/" + provider.grant, provider.link)
        self.assertRegex(provider.link, SHELL_SAFE_LINK_RE)  # issue 39: safe to paste unquoted (test_cli.ShellSafeLinks)
        self.assertIsNotNone(provider.ready["expires"])  # 24 h by default (test_grants.DefaultExpiry)

        info = self.info(chome, provider.link)
        self.assertTrue(INFO_KEYS <= set(info), "missing keys: %s" % (INFO_KEYS - set(info)))
        self.assertTrue(GRANT_KEYS <= set(info["grant"]), "missing grant keys: %s" % (GRANT_KEYS - set(info["grant"])))
        self.assertEqual(info["path"], "direct")
        self.assertEqual(info["address"], provider.listen)
        self.assertEqual(info["provider"], provider.peer)
        self.assertEqual(info["grant"]["id"], provider.grant)
        self.assertEqual((info["grant"]["uses"], info["grant"]["connections"]), (1, 1))
        self.assertEqual(info["grant"]["state"], "active")
        self.assertIsNone(info["grant"]["max_uses"])
        self.assertIsNone(info["grant"]["uses_left"])
        self.assertIn("info", info["grant"]["services"])
        self.assertGreater(info["bandwidth_mbps"], 0)
        self.assertGreater(info["setup_ms"], 0)
        self.assertGreaterEqual(info["rtt_ms"], 0)
        self.assertIsInstance(info["host"], dict)
        self.assertIsInstance(info["gpus"], list)
        local_gpus = json.loads(self.ok(phome, "gpus", "--json").stdout)
        if not local_gpus["gpus"]:
            self.assertEqual(info["gpus"], [])
            self.assertIn("no nvidia gpu", info["gpu_note"].lower())

        opened = provider.wait_for(lambda e: e.get("event") == "session_open", READY_DEADLINE, "session_open")
        self.assertEqual(opened["peer"], consumer_id)
        self.assertEqual(opened["grant"], provider.grant)
        closed = provider.wait_for(lambda e: e.get("event") == "session_closed", READY_DEADLINE, "session_closed")
        self.assertEqual(closed["session"], opened["session"])
        self.assertIn("reason", closed)

        # The audit log: the consumer's PeerId accepted, then the info service used.
        def logged():
            events = self.audit(phome)
            auth = [e for e in events if e["kind"] == "auth" and e["decision"] == "accept"
                    and e["peer"] == consumer_id and e["grant_id"] == provider.grant]
            service = [e for e in events if e["kind"] == "service" and e["peer"] == consumer_id
                       and e["detail"] and e["detail"].get("service") == "info"]
            close = [e for e in events if e["kind"] == "session_close" and e["peer"] == consumer_id]
            return events if (auth and service and close) else None
        events = self.poll_until(logged, 20, "auth accept, service and session_close in the audit log")
        self.assertFalse([e for e in events if e["decision"] == "refuse"], events)

        row = self.grant_row(phome, provider.grant, all=False)
        self.assertEqual(row["uses"], 1)
        self.assertEqual(row["state"], "active")

        # Nothing about the provider leaked into the consumer's own state, and SIGTERM stops cleanly.
        self.assertEqual(self.audit(chome), [])
        self.assertEqual(provider.stop(), 0, provider.stderr())

    def test_human_output_and_stdin_link(self):
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        provider = self.start_provider(phome)
        cp = self.ok(chome, "info", "-", input=provider.link + "\n")
        self.assertIn("provider  " + provider.peer, cp.stdout)
        self.assertIn("path      direct via " + provider.listen, cp.stdout)
        self.assertIn("consumers 1/unlimited", cp.stdout)


class Restart(E2ETestCase):
    def test_serve_only_keeps_old_links(self):
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        consumer_id = self.peer_id(chome)
        port = free_port()
        listen = "127.0.0.1:%d" % port
        first = self.start_provider(phome, "--max-uses", "3", "--label", "restart-test", "--public-label", listen=listen, name="provider1")
        self.assertEqual(first.port, port)
        info = self.info(chome, first.link)
        self.assertEqual((info["grant"]["uses"], info["grant"]["connections"]), (1, 1))
        self.assertEqual(info["grant"]["max_uses"], 3)
        first.wait_for(lambda e: e.get("event") == "session_closed", READY_DEADLINE, "session_closed")
        first.signal(signal.SIGTERM)
        self.assertEqual(first.wait(30), 0, "provider did not exit 0 on SIGTERM: %s" % first.stderr())

        # Between runs nothing listens: the link fails clearly.
        self.fails(chome, "info", "--json", "--timeout", "3", first.link, contains="cannot reach the provider")

        second = self.start_provider(phome, "--serve-only", listen=listen, name="provider2")
        self.assertNotIn("link", second.ready)
        self.assertEqual(second.peer, first.peer)
        self.assertEqual(second.port, port)
        info = self.info(chome, first.link)
        self.assertEqual(info["grant"]["id"], first.grant)
        self.assertEqual((info["grant"]["uses"], info["grant"]["connections"]), (1, 2))
        self.assertEqual(info["grant"]["label"], "restart-test")

        events = self.audit(phome)
        accepts = [e for e in events if e["kind"] == "auth" and e["decision"] == "accept" and e["peer"] == consumer_id]
        self.assertEqual([e["detail"]["connections"] for e in accepts], [1, 2], events)
        sessions = {e["detail"]["session"] for e in accepts}
        closes = [e for e in events if e["kind"] == "session_close"]
        self.assertTrue(any(e["detail"]["session"] in sessions for e in closes), events)
        links = self.links(phome)
        self.assertEqual([(g["uses"], g["connections"]) for g in links if g["id"] == first.grant], [(1, 2)])


    def test_provider_stop_ends_live_session(self):
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        provider = self.start_provider(phome)
        watcher = self.start(chome, "info", "--watch", "1", "--json", provider.link, name="watcher")
        watcher.wait_for(lambda e: "grant" in e, READY_DEADLINE, "the first report")
        self.assertEqual(provider.stop(), 0, provider.stderr())
        rc = watcher.wait(20)
        self.assertIsNotNone(rc, "the consumer did not notice the provider stopping")
        self.assertEqual(rc, 1)
        self.assertIn("the provider ended this session (it stopped sharing)", watcher.stderr())
        events = self.audit(phome)
        self.assertTrue([e for e in events if e["kind"] == "session_close"], events)
        self.assertEqual(self.run_cli(phome, "log", "--json", "--since", "10m").stdout.count("\n"), len(events))


class HostileConnections(E2ETestCase):
    def test_garbage_and_stalled_connections(self):
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        provider = self.start_provider(phome)
        addr = ("127.0.0.1", provider.port)
        socks = []

        def connect():
            s = socket.create_connection(addr, timeout=10)
            socks.append(s)
            self.addCleanup(s.close)
            return s

        # 1. 64 KiB of random bytes (first byte not a TLS record type, so the TLS layer fails at once).
        garbage = connect()
        garbage_port = garbage.getsockname()[1]
        payload = b"\xff" + os.urandom(64 * 1024 - 1)
        try:
            garbage.sendall(payload)
        except OSError:
            pass  # the provider may hang up before reading it all: that's fine

        # 2. Connects and says nothing.
        silent = connect()
        # 3. A TLS record header announcing a ClientHello, then a few bytes, then a stall.
        stalled = connect()
        body = b"\x01\x00\x01\xfc\x03\x03" + os.urandom(32)
        stalled.sendall(b"\x16\x03\x01" + struct.pack(">H", 0x200) + body)

        # While those are open a real consumer gets through.
        info = self.info(chome, provider.link)
        self.assertEqual(info["grant"]["connections"], 1)
        self.assertTrue(provider.alive(), provider.stderr())

        def garbage_refused():
            return [e for e in self.audit(phome) if e["kind"] == "connect" and e["decision"] == "refuse"
                    and e["address"] == "127.0.0.1:%d" % garbage_port]
        refusals = self.poll_until(garbage_refused, 20, "a connect refusal for the garbage connection")
        self.assertIn("TLS", refusals[0]["reason"])
        # The garbage connection never reached the secret check.
        self.assertFalse([e for e in self.audit(phome) if e["kind"] == "auth" and e["decision"] == "refuse"])

        for s in socks:
            s.close()
        # Still serving after the hostile peers left.
        info = self.info(chome, provider.link)
        self.assertEqual(info["grant"]["connections"], 2)
        self.assertTrue(provider.alive(), provider.stderr())
        self.assertEqual(provider.stop(), 0, provider.stderr())

    def test_many_garbage_connections(self):
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        provider = self.start_provider(phome)
        for i in range(30):
            with socket.create_connection(("127.0.0.1", provider.port), timeout=10) as s:
                try:
                    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" if i % 2 else b"\x00" * 100)
                except OSError:
                    pass
        info = self.info(chome, provider.link)
        self.assertEqual(info["grant"]["uses"], 1)
        self.assertTrue(provider.alive())


class DialRaceLosers(E2ETestCase):
    """A consumer dials every address of the link and closes the connections that lose the race:
    those are not refusals (issue 17), while a wrong secret still is."""

    def test_losing_connections_are_not_refusals(self):
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        consumer_id = self.peer_id(chome)
        provider = self.start_provider(phome, listen="0.0.0.0:0")
        # Four candidate addresses, all this provider (every 127/8 address is loopback): three lose each race.
        addresses = ",".join("127.0.0.%d:%d" % (i, provider.port) for i in (1, 2, 3, 4))
        link = replace_query_param(provider.link, "c", addresses)
        self.assertEqual(split_link(link)["c"], addresses)
        for n in (1, 2, 3):
            self.assertEqual(self.info(chome, link)["grant"]["connections"], n)
        self.fails(chome, "info", "--json", replace_secret(link, random_secret()), contains="wrong secret")
        provider.wait_for(lambda e: e.get("event") == "refused", READY_DEADLINE, "the wrong secret's refused event")
        self.assertEqual(provider.stop(), 0, provider.stderr())  # writes what is aggregated

        events = self.audit(phome)
        refusals = [e for e in events if e["decision"] == "refuse"]
        self.assertEqual(len(refusals), 1, "expected only the wrong secret's refusal: %r" % refusals)
        self.assertEqual(refusals[0]["kind"], "auth")
        self.assertIn("wrong secret", refusals[0]["reason"])
        self.assertEqual(refusals[0]["peer"], consumer_id)
        self.assertEqual([e["reason"] for e in provider.events_named("refused")], [refusals[0]["reason"]])
        # What the losers left, if anything, is an aggregated record that says what happened.
        for e in events:
            if e["decision"] == "abandon":
                self.assertEqual(e["kind"], "connect")
                self.assertGreaterEqual(e["detail"]["count"], 1)
                self.assertIn("closed", e["reason"])
        human = self.ok(phome, "log").stdout
        self.assertNotIn("refuse (bad auth message", human)
        self.assertNotIn("TLS handshake failed", human)


if __name__ == "__main__":
    unittest.main()
