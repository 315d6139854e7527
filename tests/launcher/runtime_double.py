#!/usr/bin/env python3
"""A runtime double: behaves like ``mur run NAME@VERSION --workdir DIR --json --no-env-file
--spawn-grant-stdin`` as far as the launcher can tell (an external runtime, not a mock of roost).

It reads the approval line from stdin, registers at ``MURMUR_ROOST_URL`` (``/register`` with
session_id, name, version, workdir, pid), prints the ready line, then does what its task says
(``input.json`` objective, words separated by spaces):

* ``sleep N`` — sleep N seconds, then finish ``ok`` (writes completion.json, reported_by child);
* ``crash`` — three recognisable stderr lines, exit 7 with no completion;
* ``never-ready`` — never prints the ready line; ``bad-ready`` — prints a non-JSON line, exits 1;
* ``hold-ready`` — registers, then prints its ready line only once a file ``go`` appears in its
  directory (a child slow to become ready, for as long as the test wants);
* ``stubborn`` — ignore SIGTERM;
* ``no-pid`` — register without a pid (an external runtime roost cannot watch by pid);
* ``linger`` — after its own deregistration, stay until a file ``go`` appears in its directory;
* ``delegate NAME TASK…`` — launch NAME through ``POST /jobs`` with its own credential;
* ``plant-link`` / ``plant-other=PATH`` — an attacker: register a workdir it planted instead of its
  own (``evil`` in its directory, a symbolic link to ``/etc``; ``PATH``, a directory of another
  uid the test planted, since a child holds no capability to chown); when refused, write the
  answer to ``refused.json`` and exit 3;
* ``chatter`` — after the ready line print ``chatter: first`` on stdout, wait until a file
  ``go`` appears in its directory, print ``chatter: last``, then finish like ``sleep 0``;
* ``garbled`` — finish as usual (its own deregistration), but leave a ``completion.json`` that
  is not a completion record (no readable record behind a finished child).

It always writes ``double.json`` (argv, environment, whether an approval came on stdin) and, on
lifeline EOF, ``spawner_ended.json``, then exits 143 without a completion (as upstream does).
"""

import json
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request


def post(url, body, headers=None):
    req = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"content-type": "application/json", **(headers or {})},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"{}")


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(obj, fh, indent=2)
        fh.write("\n")
    os.replace(tmp, path)


def main():
    coords = sys.argv[1]
    name, version = coords.split("@")
    workdir = sys.argv[sys.argv.index("--workdir") + 1]
    approval = sys.stdin.readline().strip() if "--spawn-grant-stdin" in sys.argv else ""
    stdin_rest = sys.stdin.read()
    task = ""
    try:
        with open(os.path.join(workdir, "input.json")) as fh:
            task = json.load(fh)["payload"]["objective"] or ""
    except (OSError, ValueError, KeyError):
        pass
    words = task.split()
    write_json(
        os.path.join(workdir, "double.json"),
        {
            "argv": sys.argv,
            "env": dict(os.environ),
            "approval_on_stdin": bool(approval),
            "approval_prefix": approval[:5],
            "stdin_rest": stdin_rest,
            "cwd": os.getcwd(),
            "pid": os.getpid(),
        },
    )
    if "stubborn" in words:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "never-ready" in words:
        time.sleep(3600)
    if "bad-ready" in words:
        print("this is not a ready line", flush=True)
        return 1
    roost = os.environ["MURMUR_ROOST_URL"]
    sid = "ses_" + os.urandom(8).hex()
    headers = {"x-murmur-spawn-approval": approval} if approval else {}
    named = workdir
    own = words[: words.index("delegate")] if "delegate" in words else words  # not its child's task
    if "plant-link" in own:
        named = os.path.join(workdir, "evil")
        os.symlink("/etc", named)
    other = next((w.split("=", 1)[1] for w in own if w.startswith("plant-other=")), None)
    if other is not None:
        # A directory of another uid that the test planted (a child holds no capability to chown).
        named = other
    try:
        body = {"session_id": sid, "name": name, "version": version, "workdir": named}
        if "no-pid" not in own:
            body["pid"] = os.getpid()
        cred = post(roost + "/register", body, headers)["credential"]
    except urllib.error.HTTPError as exc:
        if named == workdir:
            raise
        write_json(os.path.join(workdir, "refused.json"), {"status": exc.code, "body": json.loads(exc.read())})
        return 3
    spawner = json.loads(os.environ.get("MURMUR_SPAWNER") or "null")
    started = time.monotonic()

    lifeline = os.environ.get("MURMUR_SPAWNER_LIFELINE")
    if lifeline:
        fd = int(lifeline)

        def watch():
            while True:
                try:
                    chunk = os.read(fd, 64)
                except InterruptedError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    break
            write_json(
                os.path.join(workdir, "spawner_ended.json"),
                {
                    "event_type": "spawner_ended",
                    "spawned_by": (spawner or {}).get("session_id"),
                    "delegation_id": (spawner or {}).get("delegation_id"),
                },
            )
            print(
                "spawner lifeline closed — the session that delegated to this one has ended",
                file=sys.stderr,
                flush=True,
            )
            os._exit(143)

        threading.Thread(target=watch, daemon=True, name="spawner-lifeline").start()
    if "hold-ready" in own:
        while not os.path.exists(os.path.join(workdir, "go")):
            time.sleep(0.05)
    print(json.dumps({"session_id": sid, "capsule_url": None}), flush=True)

    if "crash" in words:
        for i in range(3):
            print(f"double: crash line {i}", file=sys.stderr, flush=True)
        os._exit(7)
    if "delegate" in words:
        i = words.index("delegate")
        child, rest = words[i + 1], " ".join(words[i + 2 :])
        job = post(
            roost + "/jobs", {"name": child, "version": "0.1.0", "task": rest}, {"x-murmur-spawn-credential": cred}
        )
        write_json(os.path.join(workdir, "delegated.json"), job)
    if "chatter" in words:
        print("chatter: first", flush=True)
        while not os.path.exists(os.path.join(workdir, "go")):
            time.sleep(0.05)
        print("chatter: last", flush=True)
    if "sleep" in words:
        time.sleep(float(words[words.index("sleep") + 1]))
    elif "delegate" in words or "hang" in words:
        time.sleep(3600)
    if spawner and "garbled" in words:
        with open(os.path.join(workdir, "completion.json"), "w") as fh:
            fh.write("{not a completion record")
    elif spawner:
        write_json(
            os.path.join(workdir, "completion.json"),
            {
                "delegation_id": spawner["delegation_id"],
                "capsule_name": name,
                "capsule_version": version,
                "session_id": sid,
                "status": "ok",
                "workdir": workdir,
                "duration_ms": int((time.monotonic() - started) * 1000),
                "reported_by": "child",
                "delivered": True,
            },
        )
    post(roost + "/deregister", {"outcome": "complete"}, {"x-murmur-spawn-credential": cred})
    if "linger" in words:
        while not os.path.exists(os.path.join(workdir, "go")):
            time.sleep(0.05)
    return 0


if __name__ == "__main__":
    sys.exit(main())
