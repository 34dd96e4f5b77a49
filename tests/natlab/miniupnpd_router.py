"""A real miniupnpd (Debian's miniupnpd-iptables) as the NAT lab's router A.

Facts this relies on (../shared/LAB-NOTES.md):
- miniupnpd 2.3.1 drives legacy iptables (libiptc): MASQUERADE, FORWARD and
  its MINIUPNPD chains go through `iptables-legacy` in the router namespace,
  and the nft rules the other cases put there are flushed first.
- Its chains come from `iptables_init.sh` (miniupnpd-iptables) whose helper
  `miniupnpd_functions.sh` ships in the separate `miniupnpd` package: taken
  from /etc/miniupnpd when present, else `apt-get download miniupnpd` and
  `dpkg -x` into the lab's temp dir (no service is installed).
- A TEST-NET external address is refused unless found by STUN, so a STUN
  responder (stun_responder.py) runs on the "internet" side.

Used as a context manager; leaving it (also on failure) stops both daemons
and removes every legacy iptables rule and chain it made. The namespaces
themselves belong to natlab.py.
"""
import glob, os, shutil, subprocess, time

HERE = os.path.dirname(os.path.abspath(__file__))
INIT = "/etc/miniupnpd/iptables_init.sh"


class Skip(Exception):
    """The case cannot run on this machine; the message says why."""


def _run(cmd, check=True):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{cmd}: {r.stderr.strip()}")
    return r.stdout


class MiniUpnpdRouter:
    def __init__(self, ns, wan_if, lan_if, stun_ns, stun_ip, tmp, spawn):
        self.ns, self.wan, self.lan = ns, wan_if, lan_if
        self.stun_ns, self.stun_ip = stun_ns, stun_ip
        self.dir = os.path.join(tmp, "miniupnpd")
        self.lease = os.path.join(self.dir, "leases")
        self.spawn = spawn
        self.daemon = self.stun = None

    def _nsx(self, cmd, check=True):
        return _run(f"ip netns exec {self.ns} {cmd}", check)

    def _init_scripts(self):
        """iptables_init.sh and its helper, side by side in our temp dir."""
        helper = "/etc/miniupnpd/miniupnpd_functions.sh"
        if not os.path.exists(helper):
            dl = os.path.join(self.dir, "deb")
            os.makedirs(dl, exist_ok=True)
            r = subprocess.run("apt-get download miniupnpd", shell=True, cwd=dl, capture_output=True, text=True)
            debs = glob.glob(os.path.join(dl, "miniupnpd_*.deb"))
            if not debs:
                raise Skip("miniupnpd_functions.sh (package miniupnpd) is not installed and "
                           f"`apt-get download miniupnpd` failed: {r.stderr.strip()[-200:]}")
            _run(f"dpkg -x {debs[0]} {dl}/x")
            helper = os.path.join(dl, "x/etc/miniupnpd/miniupnpd_functions.sh")
        shutil.copy(INIT, self.dir)
        shutil.copy(helper, self.dir)
        # The scripts call plain `iptables`: make it the legacy one for them only.
        os.makedirs(os.path.join(self.dir, "bin"), exist_ok=True)
        os.symlink(shutil.which("iptables-legacy"), os.path.join(self.dir, "bin", "iptables"))

    def __enter__(self):
        for tool, pkg in (("miniupnpd", "miniupnpd-iptables"), ("iptables-legacy", "iptables")):
            if not shutil.which(tool):
                raise Skip(f"{tool} is not installed (apt-get install {pkg})")
        if not os.path.exists(INIT):
            raise Skip(f"{INIT} is missing (apt-get install miniupnpd-iptables)")
        os.makedirs(self.dir, exist_ok=True)
        try:
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self):
        self._init_scripts()
        # Router A: nft rules from other cases out, legacy NAT in.
        self._nsx("iptables -t nat -F")
        self._nsx("iptables -F")
        env = f"env PATH={self.dir}/bin:{os.environ.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"
        self._nsx(f"{env} sh {self.dir}/iptables_init.sh -i {self.wan}")
        ipt = "iptables-legacy -w"
        self._nsx(f"{ipt} -t nat -A POSTROUTING -o {self.wan} -j MASQUERADE")
        for chain in ("FORWARD", "INPUT"):
            self._nsx(f"{ipt} -A {chain} -i {self.wan} -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT")
            self._nsx(f"{ipt} -A {chain} -i {self.wan} -j DROP")
        self._nsx("conntrack -F", check=False)

        self.stun = self.spawn(["ip", "netns", "exec", self.stun_ns, "python3",
                                os.path.join(HERE, "stun_responder.py"), self.stun_ip, "3478"], "stun.log")
        if self.stun.stdout.readline().strip() != "ready":
            raise RuntimeError("STUN responder did not start")

        conf = os.path.join(self.dir, "miniupnpd.conf")
        with open(conf, "w") as f:
            f.write(f"""ext_ifname={self.wan}
listening_ip={self.lan}
port=5555
enable_natpmp=yes
enable_upnp=yes
secure_mode=yes
ext_perform_stun=yes
ext_stun_host={self.stun_ip}
ext_stun_port=3478
lease_file={self.lease}
uuid=3b9c1a52-7e0d-4f3e-9a57-6f6e61746c61
system_uptime=yes
allow 1024-65535 192.0.2.0/24 1024-65535
deny 0-65535 0.0.0.0/0 0-65535
""")
        self.daemon = self.spawn(["ip", "netns", "exec", self.ns, "miniupnpd", "-f", conf, "-d",
                                  "-P", os.path.join(self.dir, "miniupnpd.pid")], "miniupnpd.log")
        log = os.path.join(os.path.dirname(self.dir), "miniupnpd.log")
        deadline = time.time() + 15
        while time.time() < deadline:
            if self.daemon.poll() is not None:
                raise RuntimeError(f"miniupnpd exited: {open(log, errors='replace').read()[-1500:]}")
            text = open(log, errors="replace").read()
            if "Port forwarding is impossible" in text or "port forwarding impossible" in text.lower():
                raise RuntimeError(f"miniupnpd refuses port forwarding: {text[-1500:]}")
            if ":5555 " in self._nsx("ss -ltnH", check=False) and "STUN" in text.upper():
                return
            time.sleep(0.1)
        raise RuntimeError(f"miniupnpd did not start: {open(log, errors='replace').read()[-1500:]}")

    def mappings(self):
        """What the router holds now: lease-file lines plus DNAT rules in its MINIUPNPD chain."""
        leases = open(self.lease).read().splitlines() if os.path.exists(self.lease) else []
        rules = [r for r in self._nsx("iptables-legacy -w -t nat -S MINIUPNPD", check=False).splitlines()
                 if "DNAT" in r]
        return leases + rules

    def __exit__(self, *exc):
        for p in (self.daemon, self.stun):
            if p and p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        ipt = "iptables-legacy -w"
        for table in ("filter", "nat", "mangle"):
            self._nsx(f"{ipt} -t {table} -F", check=False)
            self._nsx(f"{ipt} -t {table} -X", check=False)
        return False
