#!/usr/bin/env python3
"""Instructions per call from a callgrind profile made with --dump-instr=yes:
every instruction address counts at most CALLS times, so a spin loop counts
once per call however long it waited (waiting is not work), and setup counts
once in all. Usage: callgrind_net.py PROFILE CALLS"""
import collections
import re
import sys


def position(token, previous):
    if token == "*":
        return previous
    if token[0] == "+":
        return previous + int(token[1:], 0)
    if token[0] == "-":
        return previous - int(token[1:], 0)
    return int(token, 0)


def main():
    path, calls = sys.argv[1], int(sys.argv[2])
    costs = collections.Counter()
    names, obj = {}, None
    after_calls = False
    addr = line = 0
    with open(path) as f:
        for raw in f:
            text = raw.rstrip("\n")
            if not text:
                continue
            m = re.match(r"^(ob|cob)=\((\d+)\)(?: (.*))?$", text)
            if m:
                if m.group(3):
                    names[m.group(2)] = m.group(3)
                if m.group(1) == "ob":
                    obj = names[m.group(2)]
                continue
            if text.startswith("calls="):
                after_calls = True
                continue
            if text[0] in "0123456789+-*":
                fields = text.split()
                addr = position(fields[0], addr)
                line = position(fields[1], line)
                # The line after calls= is the call's inclusive cost: skip it.
                if not after_calls and len(fields) > 2:
                    costs[(obj, addr)] += int(fields[2])
                after_calls = False
                continue
            after_calls = False
    net = sum(min(c, calls) for c in costs.values())
    print(round(net / calls))


if __name__ == "__main__":
    main()
