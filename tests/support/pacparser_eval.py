#!/usr/bin/env python3
"""Answers PAC queries with pacparser, an independent PAC engine, for
tests/integration/pac_compare_test.cc (the same input and output format as
`pac_probe eval`).

    pacparser_eval.py PAC_FILE QUERIES_FILE [MY_IP]

Each "URL HOST" line of QUERIES_FILE gets one output line: what
FindProxyForURL (or FindProxyForURLEx, Microsoft's extensions being on)
returned, or "ERROR exception: ..." when it failed. MY_IP is what
myIpAddress() and myIpAddressEx() return.
"""
import sys

import pacparser


def main():
    pac_file, queries_file = sys.argv[1], sys.argv[2]
    pacparser.enable_microsoft_extensions()
    pacparser.init()
    if len(sys.argv) > 3:
        pacparser.setmyip(sys.argv[3])
    pacparser.parse_pac_file(pac_file)
    with open(queries_file) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            url, _, host = line.partition(" ")
            try:
                print(pacparser.find_proxy(url, host))
            except Exception as e:  # pacparser raises on script errors
                print("ERROR exception: %s" % e)
    pacparser.cleanup()


if __name__ == "__main__":
    main()
