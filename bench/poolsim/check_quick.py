#!/usr/bin/env python3
"""ctest poolsim_quick: on the quick pool, our scheduler finishes the batch
sooner than round-robin. A result check on poolsim's --json output, not a
timing check (simulated seconds, not wall-clock)."""
import json
import subprocess
import sys


def main() -> int:
    poolsim = sys.argv[1]
    out = subprocess.run([poolsim, "--quick", "--json", "--policies", "ours", "round-robin"],
                         check=True, capture_output=True, text=True, timeout=600).stdout
    report = json.loads(out)
    results = {r["policy"]: r for r in report["results"]}
    ours, rr = results["ours"], results["round-robin"]
    for r in (ours, rr):
        if not r["finished"] or r["tasks"] != report["tasks"]:
            print(f"{r['policy']}: batch not finished ({r['tasks']} of {report['tasks']} tasks)")
            return 1
    print(f"makespan: ours {ours['makespan_s']:.0f} s, round-robin {rr['makespan_s']:.0f} s; "
          f"utilisation: ours {ours['utilisation']:.3f}, round-robin {rr['utilisation']:.3f}")
    if not ours["makespan_s"] < rr["makespan_s"]:
        print("FAIL: our scheduler's makespan is not below round-robin's")
        return 1
    if not ours["utilisation"] > rr["utilisation"]:
        print("FAIL: our scheduler's utilisation is not above round-robin's")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
