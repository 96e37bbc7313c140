# SPDX-License-Identifier: MIT
"""The Python peer of the peer protocol (PROTOCOL beside this file)."""
import sys
import threading

import weblocks


def main() -> int:
    locks = weblocks.LockManager(sys.argv[1])
    out_lock = threading.Lock()
    releases = {}

    def say(*words: object) -> None:
        with out_lock:
            print(*words, flush=True)

    def hold(name: str, mode: str, go: threading.Event) -> None:
        try:
            with locks.request(name, mode=mode) as lock:
                say("granted", name, lock.token)
                go.wait()
            say("released", name)
        except weblocks.WebLocksError as e:
            say("error", e.name, e)

    say("ready", locks.client_id, __import__("os").getpid())
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "acquire":
            go = releases[cmd[1]] = threading.Event()
            threading.Thread(target=hold, args=(cmd[1], cmd[2], go),
                             daemon=True).start()
        elif cmd[0] == "release":
            releases.pop(cmd[1]).set()
        elif cmd[0] == "query":
            snap = locks.query()
            with out_lock:
                for kind, entries in (("held", snap.held),
                                      ("pending", snap.pending)):
                    for e in entries:
                        print(kind, e.name, e.mode, e.client_id)
                print("end", flush=True)
        elif cmd[0] == "exit":
            break
        else:
            say("error", "TypeError", "unknown command", cmd[0])
    locks.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
