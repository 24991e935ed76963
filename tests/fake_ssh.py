#!/usr/bin/env python3
"""A stand-in for ``ssh`` in tests: runs the command on the test host that has the given address.

Behaves like OpenSSH for what the launcher relies on: the remote command is one string run
by ``sh -c`` in a fresh, minimal environment (sshd passes none of the client's); the
client's stdin is relayed to it, and end-of-file on the client's stdin (or the client's
death) closes the remote command's stdin; the exit status is the remote command's.
``FAKE_SSH_HOSTS`` names a JSON file {address: argv prefix of that test host};
``FAKE_SSH_LOG`` (optional) a file that gets one JSON line per call (the client's argv).
"""

import json
import os
import subprocess
import sys
import threading

WITH_VALUE = {"-o", "-p", "-i", "-l", "-F", "-J"}


def main() -> int:
    args = sys.argv[1:]
    if os.environ.get("FAKE_SSH_LOG"):
        with open(os.environ["FAKE_SSH_LOG"], "a") as f:
            f.write(json.dumps(args) + "\n")
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in WITH_VALUE else 1
    dest, command = args[i], " ".join(args[i + 1 :])
    host = dest.rsplit("@", 1)[-1]
    prefixes = json.load(open(os.environ["FAKE_SSH_HOSTS"]))
    if host not in prefixes:
        print(f"ssh: Could not resolve hostname {host}: Name or service not known", file=sys.stderr)
        return 255
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": os.environ.get("HOME", "/")}
    p = subprocess.Popen(prefixes[host] + ["sh", "-c", command], stdin=subprocess.PIPE, env=env)

    def relay():
        try:
            while data := os.read(0, 1 << 16):
                p.stdin.write(data)
                p.stdin.flush()
        except OSError:
            pass
        finally:
            try:
                p.stdin.close()  # EOF, as sshd closes the remote command's stdin
            except OSError:
                pass

    threading.Thread(target=relay, daemon=True).start()
    return p.wait()


if __name__ == "__main__":
    sys.exit(main())
