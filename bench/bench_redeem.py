"""Redeem throughput: ``GET /resources/peer/<handle>`` vs aiohttp ``FileResponse`` on the same file.

Both servers run pinned to the same core in the same run; wrk (-t1) runs on the other core with
the ``x-murmur-audience`` header set. Every roost redeem is a real one: shape, per-session key,
constant-time MAC, expiry, the descriptor walk (O_NOFOLLOW on every component), fstat on the
descriptor, the sha256 etag (small files: hashed as read; large: from the identity-keyed cache,
then sendfile and a re-fstat) and a ``peer_handle_redeem`` trace line.
Targets: >= 0.6x requests/s for 4 KiB, >= 0.8x bytes/s for 1 MiB. Rounds alternate between the two
servers (which one goes first flips each round); the median round of each is reported.

Run: python bench/bench_redeem.py [--seconds 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import app_script, make_registry, median_by, post_json, start_daemon, start_script, wrk

FILE_SERVER = app_script(
    """
    import sys
    from aiohttp import web

    ROOT = sys.argv[1]

    async def handler(request):
        return web.FileResponse(ROOT + "/" + request.match_info["name"])

    def build_app():
        app = web.Application()
        app.router.add_get("/files/{name}", handler)
        return app
    """
)

CARD_SERVER = app_script(
    """
    from aiohttp import web

    holder = {}

    async def card(request):
        return web.json_response({"name": "reader", "url": holder["url"], "version": "0.1.0"})

    def build_app():
        app = web.Application()
        app.router.add_get("/.well-known/agent-card.json", card)
        return app

    def on_port(port):
        holder["url"] = f"http://127.0.0.1:{port}/"
    """
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per file size (median reported)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "registry"
        make_registry(
            root,
            {
                "sharer": {
                    "capabilities": {"network": {"allow": ["127.0.0.1"]}},
                    "exports": {"peer_files": {"root": "share", "max_bytes": "10Mi"}},
                }
            },
        )
        workdir = Path(tmp) / "work"
        share = workdir / "share"
        share.mkdir(parents=True)
        (share / "small.bin").write_bytes(os.urandom(4096))
        (share / "large.bin").write_bytes(os.urandom(1024 * 1024))
        daemon = start_daemon(
            ["--registry-path", str(root), "--state-dir", str(Path(tmp) / "state"), "--spawn-allow", "sharer"]
        )
        bare = start_script(FILE_SERVER.replace("sys.argv[1]", repr(str(share))))
        card = start_script(CARD_SERVER, cpu="1")
        results = {}
        try:
            cred = post_json(
                daemon.url + "/register",
                {"session_id": "ses_bench", "name": "sharer", "version": "0.1.0", "workdir": str(workdir)},
            )["credential"]
            hdr = {"x-murmur-spawn-credential": cred}
            for name in ("small.bin", "large.bin"):
                minted = post_json(daemon.url + "/handles", {"path": name, "peer": card.url}, hdr)
                aud = {"x-murmur-audience": minted["audience"]}
                r_url = f"{daemon.url}/resources/peer/{minted['handle']}"
                b_url = f"{bare.url}/files/{name}"
                wrk(b_url, headers=aud, seconds=2)  # warm-up
                wrk(r_url, headers=aud, seconds=2)
                bs, rs = [], []
                for rnd in range(args.rounds):
                    # Alternate which server goes first, so a noisy neighbour hits both alike.
                    order = ((b_url, bs), (r_url, rs)) if rnd % 2 == 0 else ((r_url, rs), (b_url, bs))
                    for url, into in order:
                        into.append(wrk(url, headers=aud, seconds=args.seconds, connections=args.connections))
                key = "rps" if name == "small.bin" else "bytes_per_s"
                results[name] = (median_by(bs, key), median_by(rs, key))
        finally:
            daemon.stop()
            bare.stop()
            card.stop()
    for name, (b, r) in results.items():
        size = "4 KiB" if name == "small.bin" else "1 MiB"
        line = f"{size} aiohttp FileResponse : {b.rps:9.0f} req/s {b.bytes_per_s / 2**20:9.1f} MiB/s"
        print(f"{line}  p99 {b.p99_ms:6.2f} ms")
        print(
            f"{size} roost redeem       : {r.rps:9.0f} req/s {r.bytes_per_s / 2**20:9.1f} MiB/s  p99 {r.p99_ms:6.2f} ms"
            f"  non-2xx {r.non2xx}"
        )
    b, r = results["small.bin"]
    print(f"4 KiB ratio requests/s    : {r.rps / b.rps:9.2f}x  (target >= 0.6x)")
    b, r = results["large.bin"]
    print(f"1 MiB ratio bytes/s       : {r.bytes_per_s / b.bytes_per_s:9.2f}x  (target >= 0.8x)")


if __name__ == "__main__":
    main()
