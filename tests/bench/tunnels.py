#!/usr/bin/env python3
"""Scale workload for tests/bench/run.sh: many CONNECT tunnels through a proxy.

Phase 1 opens IDLE tunnels (CONNECT, wait for 200, then nothing) and keeps
them open; the proxy's VmRSS is read from /proc before and after. Phase 2,
with the idle tunnels still open, runs ACTIVE tunnels at once, each a
`GET PATH` (plain HTTP inside the tunnel, Connection: close) whose body must
hash to SHA256. Prints key=value lines on stdout.
"""
import argparse
import asyncio
import hashlib
import resource
import sys
import time


def vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def open_tunnel(proxy_port, target, timeout):
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", proxy_port), timeout)
    writer.write(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    status = head.split(b" ", 2)[1]
    if status != b"200":
        writer.close()
        raise RuntimeError(f"CONNECT answered {status.decode(errors='replace')}")
    return reader, writer


async def active_one(args):
    reader, writer = await open_tunnel(args.proxy_port, args.target, args.timeout)
    try:
        writer.write(f"GET {args.path} HTTP/1.1\r\nHost: {args.target}\r\n"
                     "Connection: close\r\n\r\n".encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), args.timeout)
        if not head.startswith(b"HTTP/1.1 200"):
            return False
        body = await asyncio.wait_for(reader.read(), args.timeout)  # until EOF
        return hashlib.sha256(body).hexdigest() == args.sha256
    finally:
        writer.close()


async def main(args):
    sem = asyncio.Semaphore(args.open_parallel)

    async def idle_one():
        async with sem:
            return await open_tunnel(args.proxy_port, args.target, args.timeout)

    rss0 = vm_rss_kib(args.pid)
    t0 = time.monotonic()
    idle = await asyncio.gather(*(idle_one() for _ in range(args.idle)),
                                return_exceptions=True)
    ok = [t for t in idle if not isinstance(t, BaseException)]
    errors = [t for t in idle if isinstance(t, BaseException)]
    await asyncio.sleep(1)  # let the proxy settle (deferred frees, window updates)
    rss1 = vm_rss_kib(args.pid)
    print(f"idle_open_secs={time.monotonic() - t0:.2f}")
    print(f"idle_ok={len(ok)}")
    if errors:
        print(f"idle_first_error={errors[0]!r}", file=sys.stderr)
    print(f"rss_before_kib={rss0}")
    print(f"rss_idle_kib={rss1}")

    t1 = time.monotonic()
    res = await asyncio.gather(*(active_one(args) for _ in range(args.active)),
                               return_exceptions=True)
    good = sum(1 for r in res if r is True)
    bad = [r for r in res if r is not True]
    print(f"active_secs={time.monotonic() - t1:.2f}")
    print(f"active_ok={good}")
    if bad:
        print(f"active_first_failure={bad[0]!r}", file=sys.stderr)
    alive = sum(1 for _, w in ok if not w.is_closing())
    print(f"idle_still_open={alive}")
    for _, w in ok:
        w.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--proxy-port", type=int, required=True)
    p.add_argument("--target", required=True, help="host:port of the plain HTTP origin")
    p.add_argument("--pid", type=int, required=True, help="process whose VmRSS is read")
    p.add_argument("--idle", type=int, default=5000)
    p.add_argument("--active", type=int, default=500)
    p.add_argument("--path", required=True)
    p.add_argument("--sha256", required=True)
    p.add_argument("--open-parallel", type=int, default=200)
    p.add_argument("--timeout", type=float, default=60)
    a = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    asyncio.run(main(a))
