#!/usr/bin/env python3
"""Independent reference for the XSpace (.xplane.pb) reader: a minimal protobuf
wire-format walker (no generated code), printing per device plane the ops on
its `XLA Ops` / `Stream #N` lines: count and summed duration, and how many are
collectives by HLO name. Usage: python3 scripts/xplane_reference.py FILE"""
import re, sys

def fields(buf):
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 1:
            v = int.from_bytes(buf[i:i + 8], 'little'); i += 8
        elif wt == 2:
            n, i = varint(buf, i); v = buf[i:i + n]; i += n
        elif wt == 5:
            v = int.from_bytes(buf[i:i + 4], 'little'); i += 4
        else:
            raise ValueError(f"wire type {wt}")
        yield num, v

def varint(buf, i):
    r = s = 0
    while True:
        b = buf[i]; i += 1
        r |= (b & 0x7f) << s; s += 7
        if b < 0x80:
            return r, i

COMM = re.compile(r"all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute|send|recv|nccl|rccl", re.I)

def main(path):
    space = open(path, 'rb').read()
    for num, plane in fields(space):
        if num != 1:
            continue
        name, lines, meta = '', [], {}
        for f, v in fields(plane):
            if f == 2: name = v.decode()
            elif f == 3: lines.append(v)
            elif f == 4:  # map entry: key 1, value 2 (XEventMetadata: id 1, name 2, display_name 4)
                k = mname = None
                for ef, ev in fields(v):
                    if ef == 1: k = ev
                    elif ef == 2:
                        for mf, mv in fields(ev):
                            if mf == 2: mname = mv.decode(errors='replace')
                meta[k] = mname or ''
        if not name.startswith('/device:'):
            continue
        for line in lines:
            lname, events = '', []
            for f, v in fields(line):
                if f == 2: lname = v.decode()
                elif f == 4: events.append(v)
            if not (lname == 'XLA Ops' or lname.startswith('Stream #')):
                continue
            n = comm = 0; dur = 0
            for e in events:
                md = d = 0
                for f, v in fields(e):
                    if f == 1: md = v
                    elif f == 3: d = v
                n += 1; dur += d
                comm += bool(COMM.search(meta.get(md, '')))
            print(f"{name}\t{lname}\tops {n}\tsum_ps {dur}\tcomm {comm}")

if __name__ == '__main__':
    main(sys.argv[1])
