#!/usr/bin/python3
"""Reference bytes for src/report/tfevents_test.cc, derived independently of dltune's C++ writer.

    /usr/bin/python3 tools/tfevents_reference.py               # print the reference records as C++ constants
    /usr/bin/python3 tools/tfevents_reference.py --check FILE  # verify an event file dltune wrote

Only the standard library: a bit-at-a-time CRC-32C (the C++ code is table-driven), the protobuf wire format spelled
out with struct, TFRecord framing. Extra cross-checks run when their tools are present:
  * protoc (Debian protobuf-compiler, which libtorch-dev pulls in): the protobuf library's own encoder turns the same
    messages, written in text format against the field numbers of tensorflow/core/util/event.proto and
    tensorflow/core/framework/summary.proto, into bytes that must equal the hand encoding;
  * tensorboard (not packaged by Debian 12; when importable): its EventFileLoader reads the records back.
"""
import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile

FILE_VERSION = "brain.Event:2"


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), one bit at a time: reflected polynomial 0x82F63B78, init and final xor 0xFFFFFFFF."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # int64 as two's complement
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def key(field: int, wire_type: int) -> bytes:
    return varint(field << 3 | wire_type)


def length_delimited(field: int, payload: bytes) -> bytes:
    return key(field, 2) + varint(len(payload)) + payload


def event(wall_time: float, step: int = 0, file_version=None, scalar=None) -> bytes:
    """tensorflow.Event: wall_time=1 (double), step=2 (int64), file_version=3 (string), summary=5 (Summary)."""
    out = b""
    if wall_time != 0:
        out += key(1, 1) + struct.pack("<d", wall_time)
    if step != 0:
        out += key(2, 0) + varint(step)
    if file_version is not None:
        out += length_delimited(3, file_version.encode())
    if scalar is not None:
        tag, value = scalar
        # Summary.Value: tag=1 (string), simple_value=2 (float); Summary: value=1 (repeated Value).
        summary_value = (length_delimited(1, tag.encode()) if tag else b"") + key(2, 5) + struct.pack("<f", value)
        out += length_delimited(5, length_delimited(1, summary_value))
    return out


def record(data: bytes) -> bytes:
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc(length)) + data + struct.pack("<I", masked_crc(data))


def read_records(blob: bytes):
    """Yields each record's data after checking both CRCs."""
    offset, index = 0, 0
    while offset < len(blob):
        if len(blob) - offset < 12:
            raise ValueError(f"record {index}: truncated header")
        length_bytes = blob[offset:offset + 8]
        (length,) = struct.unpack("<Q", length_bytes)
        (length_crc,) = struct.unpack("<I", blob[offset + 8:offset + 12])
        if length_crc != masked_crc(length_bytes):
            raise ValueError(f"record {index}: length CRC mismatch")
        data = blob[offset + 12:offset + 12 + length]
        footer = blob[offset + 12 + length:offset + 16 + length]
        if len(data) != length or len(footer) != 4:
            raise ValueError(f"record {index}: truncated")
        if struct.unpack("<I", footer)[0] != masked_crc(data):
            raise ValueError(f"record {index}: data CRC mismatch")
        yield data
        offset += 16 + length
        index += 1


# The field numbers of tensorflow/core/util/event.proto and tensorflow/core/framework/summary.proto that dltune uses.
PROTO = """
syntax = "proto3";
package tensorflow;
message Event {
  double wall_time = 1;
  int64 step = 2;
  oneof what {
    string file_version = 3;
    Summary summary = 5;
  }
}
message Summary {
  message Value {
    string tag = 1;
    oneof value { float simple_value = 2; }
  }
  repeated Value value = 1;
}
"""


def protoc_encode(text: str) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "event.proto"), "w") as f:
            f.write(PROTO)
        return subprocess.run(["protoc", f"--proto_path={tmp}", "--encode=tensorflow.Event", "event.proto"],
                              input=text.encode(), capture_output=True, check=True).stdout


def tensorboard_events(path):
    """The events TensorBoard's own loader reads from `path`, or None when tensorboard is not importable."""
    try:
        from tensorboard.backend.event_processing import event_file_loader
    except ImportError:
        return None
    return list(event_file_loader.LegacyEventFileLoader(path).Load())


# (name, wall_time, step, file_version, scalar): the records the C++ test compares byte for byte.
CASES = [
    ("kFileVersionRecord", 1700000000.5, 0, FILE_VERSION, None),
    ("kScalarRecord", 1700000001.25, 300, None, ("train/loss", 0.1)),
    ("kNegativeStepRecord", 1700000002.0, -1, None, ("valid/error_rate", 0.75)),
]


def text_format(wall_time, step, file_version, scalar):
    parts = [f"wall_time: {wall_time!r}", f"step: {step}"]
    if file_version is not None:
        parts.append(f'file_version: "{file_version}"')
    if scalar is not None:
        parts.append(f'summary {{ value {{ tag: "{scalar[0]}" simple_value: {scalar[1]!r} }} }}')
    return " ".join(parts)


def print_reference():
    print("// Generated by tools/tfevents_reference.py.")
    for data, expected in [(b"123456789", 0xE3069283), (bytes(32), 0x8A9136AA), (b"\xff" * 32, 0x62A8AB43)]:
        assert crc32c(data) == expected, (data, hex(crc32c(data)))
    print("// CRC-32C check values confirmed: \"123456789\" 0xE3069283, 32 x 0x00 0x8A9136AA, 32 x 0xFF 0x62A8AB43.")

    have_protoc = shutil.which("protoc") is not None
    records = []
    for name, wall_time, step, file_version, scalar in CASES:
        data = event(wall_time, step, file_version, scalar)
        if have_protoc:
            assert protoc_encode(text_format(wall_time, step, file_version, scalar)) == data, name
        records.append(record(data))
        print(f"// {text_format(wall_time, step, file_version, scalar)}")
        print(f'constexpr std::string_view {name}Hex = "{record(data).hex()}";')
    print("// protoc --encode produced the same Event bytes." if have_protoc else "// protoc not found: not compared.")

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "events.out.tfevents.1700000000.reference")
        with open(path, "wb") as f:
            f.write(b"".join(records))
        assert len(list(read_records(open(path, "rb").read()))) == len(CASES)
        loaded = tensorboard_events(path)
        if loaded is None:
            print("// tensorboard is not importable here: TensorBoard's own reader not run.")
        else:
            assert len(loaded) == len(CASES), loaded
            assert loaded[0].file_version == FILE_VERSION
            assert loaded[1].step == 300 and loaded[1].summary.value[0].tag == "train/loss"
            print("// TensorBoard's EventFileLoader read the records back.")


def check(path):
    with open(path, "rb") as f:
        blob = f.read()
    count = 0
    for data in read_records(blob):
        count += 1
        print(data.hex())
    print(f"{path}: {count} records, CRCs ok")
    if shutil.which("protoc"):
        for data in read_records(blob):
            print(subprocess.run(["protoc", "--decode_raw"], input=data, capture_output=True,
                                 check=True).stdout.decode().replace("\n", " "))
    loaded = tensorboard_events(path)
    if loaded is None:
        print("tensorboard is not importable here: TensorBoard's own reader not run")
    else:
        for e in loaded:
            print(e)
        print(f"TensorBoard's EventFileLoader read {len(loaded)} events")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", metavar="FILE", help="verify an event file instead of printing references")
    args = parser.parse_args()
    if args.check:
        check(args.check)
    else:
        print_reference()
    return 0


if __name__ == "__main__":
    sys.exit(main())
