#!/usr/bin/env python3
"""Paced tunnel setup for tests/bench/auth.sh: COUNT CONNECT tunnels through a
proxy, started at RATE per second (not faster, whatever the answers take),
each a `GET PATH` (plain HTTP inside the tunnel, Connection: close) read to
its end. Two proxies compared at one rate do the same work per second, so
their CPU per tunnel is comparable (at full speed the faster one batches
more work per wakeup). Prints key=value lines on stdout.
"""
import argparse
import asyncio
import resource
import time


async def one(args):
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", args.proxy_port), args.timeout)
    try:
        writer.write(f"CONNECT {args.target} HTTP/1.1\r\nHost: {args.target}\r\n\r\n".encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), args.timeout)
        if head.split(b" ", 2)[1] != b"200":
            return False
        writer.write(f"GET {args.path} HTTP/1.1\r\nHost: {args.target}\r\n"
                     "Connection: close\r\n\r\n".encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), args.timeout)
        body = await asyncio.wait_for(reader.read(), args.timeout)  # until EOF
        return head.startswith(b"HTTP/1.1 200") and len(body) == args.size
    finally:
        writer.close()


async def main(args):
    t0 = time.monotonic()
    tasks = []
    for i in range(args.count):
        delay = t0 + i / args.rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(args)))
    res = await asyncio.gather(*tasks, return_exceptions=True)
    print(f"ok={sum(1 for r in res if r is True)}")
    print(f"secs={time.monotonic() - t0:.3f}")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--proxy-port", type=int, required=True)
    p.add_argument("--target", required=True, help="host:port of the plain HTTP origin")
    p.add_argument("--path", default="/1k")
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--rate", type=float, required=True)
    p.add_argument("--timeout", type=float, default=60)
    a = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    asyncio.run(main(a))
