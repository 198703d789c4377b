"""Reading a config file: a regular file of at most MAX_CONFIG_BYTES, in UTF-8, or a ConfigError.

The checks come before the read, on the opened file descriptor (no window between a check and the read):
a FIFO, a device (/dev/zero, /dev/stdin) or a directory would block or never end, and a file far bigger than
any config is a mistake, not a config.
"""
from __future__ import annotations

import codecs
import os
import stat

from bakeoff.harness.config.yaml_lines import ConfigError

# A config is a few kilobytes; the shipped ones are under 2 KiB.
MAX_CONFIG_BYTES = 2**20
_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"), (codecs.BOM_UTF16_LE, "UTF-16"),
         (codecs.BOM_UTF16_BE, "UTF-16"))
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def check_size(nbytes: int, file: str) -> None:
    """Refuse a config of more than MAX_CONFIG_BYTES."""
    if nbytes > MAX_CONFIG_BYTES:
        raise ConfigError(file, None, "", f"the config file is {nbytes / 2**20:.1f} MiB; a config may be at most "
                                          f"{MAX_CONFIG_BYTES // 2**20} MiB")


def decode_config(data: bytes, file: str) -> str:
    """UTF-8 text of `data` (a UTF-8 byte order mark is dropped); UTF-16/32 and invalid bytes are refused,
    naming the line of the first bad byte."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            raise ConfigError(file, 1, "", f"the config is {name} (it starts with a {name} byte order mark); "
                                           "save it as UTF-8")
    if b"\x00" in data:   # valid UTF-8 but never in a YAML file: UTF-16 or UTF-32 without a byte order mark
        line = data.count(b"\n", 0, data.index(b"\x00")) + 1
        raise ConfigError(file, line, "", "the config contains NUL bytes (UTF-16 or UTF-32 without a byte order "
                                          "mark?); save it as UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(file, line, "", f"the config is not UTF-8: byte 0x{data[exc.start]:02x} at offset "
                                          f"{exc.start} cannot be decoded; save it as UTF-8") from None


def read_config_file(path: str | os.PathLike) -> str:
    """The text of the config at `path`. Raises ConfigError (naming the file) when it cannot be read, is not
    a regular file, is larger than MAX_CONFIG_BYTES or is not UTF-8."""
    file = str(path)
    try:
        # O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever; regular files ignore it.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ConfigError(file, None, "", f"cannot read config: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        kind = next((what for test, what in _KINDS if test(info.st_mode)), None)
        if kind or not stat.S_ISREG(info.st_mode):
            raise ConfigError(file, None, "", f"the config is {kind or 'not a regular file'}, not a regular file")
        check_size(info.st_size, file)
        chunks, total = [], 0
        while total <= MAX_CONFIG_BYTES:   # a file that grows after fstat is still cut at the cap
            chunk = os.read(fd, MAX_CONFIG_BYTES + 1 - total)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        check_size(total, file)
    except OSError as exc:
        raise ConfigError(file, None, "", f"cannot read config: {exc.strerror}") from None
    finally:
        os.close(fd)
    return decode_config(b"".join(chunks), file)
