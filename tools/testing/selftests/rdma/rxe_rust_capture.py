#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Checks a capture of RoCEv2 traffic against two independent decoders.

rxe_rust_capture.py PCAP OPCODE...

PCAP is a libpcap file of Ethernet frames (tshark -F pcap). Every UDP
datagram to port 4791 in it must:
- decode in Wireshark's InfiniBand dissector (tshark): a BTH opcode, and no
  malformed-packet or error-level expert note (with the upper protocols that
  Wireshark guesses from an InfiniBand payload turned off: the tests'
  payloads are random bytes, which its RPC-over-RDMA dissector, for one,
  reports as malformed; and a zero UDP checksum over IPv6 is no error here);
- have the BTH opcode tshark reports (read here from the bytes);
- end in the ICRC that the IBTA's definition gives, computed here from the
  frame with Python's zlib CRC-32 (not with the driver's code): the
  masked fields of the IP, UDP and base transport headers set to ones,
  eight bytes of ones for the absent LRH in front, the ICRC stored least
  significant byte first.
Every OPCODE (a number, 0x.. allowed) must appear at least once. Prints
the count per opcode, and each packet that fails; exits 0 only if none
fails and no listed opcode is missing.
"""

import collections
import struct
import subprocess
import sys
import zlib

ROCE_PORT = 4791
# What Wireshark says of a zero UDP checksum over IPv6. RoCEv2 leaves it zero
# over IPv6 as over IPv4 (the ICRC covers the packet; RFC 6935 allows zero
# checksums for tunnels over IPv6), as the C driver and hardware RNICs do.
ZERO_UDP_CHECKSUM = "Illegal checksum value (0)"
BTH_LEN = 12
ICRC_LEN = 4

NAMES = {
    0x00: "RC SEND_FIRST", 0x01: "RC SEND_MIDDLE", 0x02: "RC SEND_LAST",
    0x03: "RC SEND_LAST_WITH_IMMEDIATE", 0x04: "RC SEND_ONLY",
    0x05: "RC SEND_ONLY_WITH_IMMEDIATE", 0x06: "RC RDMA_WRITE_FIRST",
    0x07: "RC RDMA_WRITE_MIDDLE", 0x08: "RC RDMA_WRITE_LAST",
    0x09: "RC RDMA_WRITE_LAST_WITH_IMMEDIATE", 0x0a: "RC RDMA_WRITE_ONLY",
    0x0b: "RC RDMA_WRITE_ONLY_WITH_IMMEDIATE", 0x0c: "RC RDMA_READ_REQUEST",
    0x0d: "RC RDMA_READ_RESPONSE_FIRST", 0x0e: "RC RDMA_READ_RESPONSE_MIDDLE",
    0x0f: "RC RDMA_READ_RESPONSE_LAST", 0x10: "RC RDMA_READ_RESPONSE_ONLY",
    0x11: "RC ACKNOWLEDGE", 0x12: "RC ATOMIC_ACKNOWLEDGE",
    0x13: "RC CMP_SWAP", 0x14: "RC FETCH_ADD",
    0x16: "RC SEND_LAST_WITH_INVALIDATE", 0x17: "RC SEND_ONLY_WITH_INVALIDATE",
    0x20: "UC SEND_FIRST", 0x21: "UC SEND_MIDDLE", 0x22: "UC SEND_LAST",
    0x23: "UC SEND_LAST_WITH_IMMEDIATE", 0x24: "UC SEND_ONLY",
    0x25: "UC SEND_ONLY_WITH_IMMEDIATE", 0x26: "UC RDMA_WRITE_FIRST",
    0x27: "UC RDMA_WRITE_MIDDLE", 0x28: "UC RDMA_WRITE_LAST",
    0x29: "UC RDMA_WRITE_LAST_WITH_IMMEDIATE", 0x2a: "UC RDMA_WRITE_ONLY",
    0x2b: "UC RDMA_WRITE_ONLY_WITH_IMMEDIATE",
    0x64: "UD SEND_ONLY", 0x65: "UD SEND_ONLY_WITH_IMMEDIATE",
}


def frames(path):
    """Yields (frame number, bytes) of each record of a libpcap file."""
    with open(path, "rb") as f:
        head = f.read(24)
        if len(head) < 24:
            raise ValueError("not a pcap file: too short")
        magic = struct.unpack("<I", head[:4])[0]
        if magic in (0xa1b2c3d4, 0xa1b23c4d):
            end = "<"
        elif magic in (0xd4c3b2a1, 0x4d3cb2a1):
            end = ">"
        else:
            raise ValueError("not a pcap file (write it with tshark -F pcap)")
        link = struct.unpack(end + "I", head[20:24])[0]
        if link != 1:
            raise ValueError(f"link type {link}, not Ethernet")
        n = 0
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            _, _, caplen, origlen = struct.unpack(end + "IIII", rec)
            data = f.read(caplen)
            n += 1
            if caplen != origlen:
                raise ValueError(f"frame {n} was cut to {caplen} of {origlen} bytes")
            yield n, data


def roce(frame):
    """Returns (IP header, UDP header, RoCE packet) of a UDP datagram to port
    4791 in an Ethernet frame, or None for any other frame."""
    ethertype = struct.unpack(">H", frame[12:14])[0]
    ip = frame[14:]
    if ethertype == 0x0800 and len(ip) >= 20 and ip[0] >> 4 == 4:
        ihl = (ip[0] & 0xf) * 4
        total = struct.unpack(">H", ip[2:4])[0]
        if ip[9] != 17:
            return None
        hdr, datagram = ip[:ihl], ip[ihl:total]
    elif ethertype == 0x86dd and len(ip) >= 40 and ip[0] >> 4 == 6:
        if ip[6] != 17:
            return None
        plen = struct.unpack(">H", ip[4:6])[0]
        hdr, datagram = ip[:40], ip[40:40 + plen]
    else:
        return None
    if len(datagram) < 8 or struct.unpack(">H", datagram[2:4])[0] != ROCE_PORT:
        return None
    return hdr, datagram[:8], datagram[8:]


def icrc(ip, udp, packet):
    """The ICRC of packet (BTH onwards, without ICRC) under the IPv4 or IPv6
    header ip and the UDP header udp, as IBTA A17.3.3 defines it."""
    ip = bytearray(ip)
    if ip[0] >> 4 == 4:
        ip[1] = 0xff                    # type of service
        ip[8] = 0xff                    # time to live
        ip[10:12] = b"\xff\xff"        # header checksum
    else:
        ip[0] |= 0x0f                   # traffic class and flow label
        ip[1:4] = b"\xff\xff\xff"
        ip[7] = 0xff                    # hop limit
    udp = bytearray(udp)
    udp[6:8] = b"\xff\xff"              # UDP checksum
    bth = bytearray(packet[:BTH_LEN])
    bth[4] = 0xff                       # reserved byte before the destination QP
    data = b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(bth) + packet[BTH_LEN:]
    return struct.pack("<I", zlib.crc32(data))


def icrc_ok(ip, udp, packet):
    """Whether the last four bytes of the RoCE packet are its ICRC."""
    if len(packet) < BTH_LEN + ICRC_LEN:
        return False
    return icrc(ip, udp, packet[:-ICRC_LEN]) == packet[-ICRC_LEN:]


def payload_protocols():
    """Returns the protocols Wireshark's heuristics look for in an InfiniBand
    payload, Ethernet's own aside."""
    out = subprocess.run(["tshark", "-G", "heuristic-decodes"], check=True,
                         capture_output=True, text=True).stdout
    return [cols[1] for cols in (line.split("\t") for line in out.splitlines())
            if len(cols) > 1 and cols[0] == "infiniband.payload" and cols[1] != "ethertype"]


def tshark_decode(path):
    """Returns {frame number: (opcode or None, problems)} for the frames
    Wireshark takes as InfiniBand."""
    off = []
    for name in payload_protocols():
        off += ["--disable-protocol", name]
    out = subprocess.run(
        ["tshark", *off, "-r", path, "-Y", f"udp.dstport == {ROCE_PORT}", "-T", "fields",
         "-E", "separator=/t", "-E", "aggregator=|", "-e", "frame.number",
         "-e", "infiniband.bth.opcode", "-e", "_ws.malformed", "-e", "_ws.expert.severity",
         "-e", "_ws.expert.message"],
        check=True, capture_output=True, text=True).stdout
    decoded = {}
    for line in out.splitlines():
        cols = (line.split("\t") + [""] * 5)[:5]
        problems = []
        if cols[2]:
            problems.append("malformed")
        # Wireshark's severity values: 0x00800000 and up is an error.
        for sev, msg in zip(cols[3].split("|"), cols[4].split("|")):
            if sev and int(sev, 0) >= 0x00800000 and msg != ZERO_UDP_CHECKSUM:
                problems.append(f"{msg} (expert severity {sev})")
        op = int(cols[1], 0) if cols[1] else None
        decoded[int(cols[0])] = (op, problems)
    return decoded


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    path = sys.argv[1]
    want = [int(a, 0) for a in sys.argv[2:]]
    decoded = tshark_decode(path)
    counts = collections.Counter()
    bad = []
    total = 0
    for n, frame in frames(path):
        r = roce(frame)
        if r is None:
            continue
        total += 1
        ip, udp, packet = r
        op = packet[0] if packet else None
        counts[op] += 1
        why = []
        if not icrc_ok(ip, udp, packet):
            why.append("ICRC wrong")
        seen = decoded.get(n)
        if seen is None:
            why.append("tshark did not decode it as RoCEv2")
        else:
            if seen[0] != op:
                why.append(f"tshark decodes opcode {seen[0]}, the BTH holds {op}")
            why.extend(seen[1])
        if why:
            bad.append(f"frame {n} ({NAMES.get(op, op)}): {', '.join(why)}")
    print(f"{total} RoCEv2 packets; tshark decoded {len(decoded)}")
    for op in sorted(k for k in counts if k is not None):
        print(f"  0x{op:02x} {NAMES.get(op, 'unknown'):36} {counts[op]}")
    for b in bad[:20]:
        print(b)
    if len(bad) > 20:
        print(f"... and {len(bad) - 20} more")
    missing = [op for op in want if counts[op] == 0]
    for op in missing:
        print(f"no 0x{op:02x} {NAMES.get(op, '')} in the capture")
    return 0 if total and not bad and not missing else 1


if __name__ == "__main__":
    sys.exit(main())
