"""Pool tests on several networks: every process runs in a network namespace of the test's own, whose
loopback also holds 127.0.N.1 for N = 2..9. A worker given a link to 127.0.N.1 connects from that
address, so the coordinator sees it on the network 127.0.N.0/24: one namespace, as many independent
networks as a test needs, nothing outside it touched. Needs root (skipped otherwise, saying why).
"""

import os
import random
import shutil
import subprocess

import harness
from harness import replace_query_param, split_link

NETWORKS = 8  # 127.0.2.1 .. 127.0.9.1


class NetnsMixin:
    """Mix into a PoolBase test: setUp makes the namespace and runs every runsnack inside it."""

    def setUp(self):
        super().setUp()
        if os.geteuid() != 0 or not shutil.which("ip"):
            print("\nskipped: needs root and iproute2 for a network namespace")
            self.skipTest("needs root and iproute2 for a network namespace")
        self.netns = "rsp-%d-%06x" % (os.getpid(), random.getrandbits(24))
        subprocess.run(["ip", "netns", "add", self.netns], check=True, capture_output=True)
        self.addCleanup(subprocess.run, ["ip", "netns", "del", self.netns], capture_output=True)
        subprocess.run(["ip", "-n", self.netns, "link", "set", "lo", "up"], check=True, capture_output=True)
        for n in range(2, 2 + NETWORKS):
            subprocess.run(["ip", "-n", self.netns, "addr", "add", "127.0.%d.1/32" % n, "dev", "lo"], check=True,
                           capture_output=True)
        wrapper = os.path.join(self.tmp, "runsnack-in-netns")
        with open(wrapper, "w") as f:
            f.write('#!/bin/sh\nexec ip netns exec %s %s "$@"\n' % (self.netns, harness.BIN))
        os.chmod(wrapper, 0o755)
        # harness starts every process as [harness.BIN] + args: for this test, inside the namespace.
        self.addCleanup(setattr, harness, "BIN", harness.BIN)
        harness.BIN = wrapper

    def link_on(self, link, network):
        """`link` rewritten to reach the coordinator at 127.0.N.1 (N = network + 2): its workers are on 127.0.N.0/24."""
        port = int(split_link(link)["c"].split(",")[0].rsplit(":", 1)[1])
        return replace_query_param(link, "c", "127.0.%d.1:%d" % (network + 2, port))

    def start_worker_on(self, name, network, *extra, env_extra=None, trusted=False):
        return self.start_worker(name, *extra, env_extra=env_extra, link=self.link_on(self.ready["join"], network),
                                 trusted=trusted)
