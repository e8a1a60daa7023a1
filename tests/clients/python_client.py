#!/usr/bin/python3
"""One download or upload through the proxy the environment names, with
Python `requests` or `httpx` (tests/integration/clients_test.cc).

  python_client.py requests|httpx get URL OUT_FILE CA_FILE
  python_client.py requests|httpx put URL IN_FILE CA_FILE   (prints the response body)

The proxy comes from HTTPS_PROXY / HTTP_PROXY as each library reads them
(requests: trust_env; httpx: trust_env=True). Exit 0 on HTTP 200; otherwise
the status or the exception goes to stderr and the exit code is 1.
"""
import sys


def main():
    lib, op, url, path, ca = sys.argv[1:6]
    if lib == "requests":
        import requests

        with requests.Session() as s:  # trust_env: proxies from the environment
            if op == "get":
                with s.get(url, verify=ca, stream=True, timeout=60) as r:
                    if r.status_code != 200:
                        print("HTTP", r.status_code, file=sys.stderr)
                        return 1
                    with open(path, "wb") as f:
                        for chunk in r.iter_content(1 << 16):
                            f.write(chunk)
            else:
                with open(path, "rb") as f:
                    r = s.put(url, data=f, verify=ca, timeout=60)
                if r.status_code != 200:
                    print("HTTP", r.status_code, file=sys.stderr)
                    return 1
                sys.stdout.write(r.text)
    elif lib == "httpx":
        import httpx

        with httpx.Client(verify=ca, trust_env=True, timeout=60) as c:
            if op == "get":
                with c.stream("GET", url) as r:
                    if r.status_code != 200:
                        print("HTTP", r.status_code, file=sys.stderr)
                        return 1
                    with open(path, "wb") as f:
                        for chunk in r.iter_bytes():
                            f.write(chunk)
            else:
                with open(path, "rb") as f:
                    r = c.put(url, content=f.read())
                if r.status_code != 200:
                    print("HTTP", r.status_code, file=sys.stderr)
                    return 1
                sys.stdout.write(r.text)
    else:
        print("unknown library", lib, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # noqa: BLE001 - the test shows what went wrong
        print(type(e).__name__, e, file=sys.stderr)
        sys.exit(1)
