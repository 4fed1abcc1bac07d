#!/usr/bin/python3
"""An independent TensorBoard event-file reader for the summary tests, written from TensorBoard's
public protos (tensorboard/compat/proto/event.proto, summary.proto, tensor.proto,
tensor_shape.proto, plugins/hparams/plugin_data.proto) and the TFRecord format, with Python's
standard library only. It shares no code with nabla's writer or reader.

  tb_reader.py --check LOGDIR EXPECTED   decode every event file in LOGDIR, verify every record's
                                         CRCs and compare with the EXPECTED lines; then flip one
                                         byte of a copy and check the corruption is detected
  tb_reader.py --dump FILE               print the decoded events
  tb_reader.py --scalars LOGDIR          print "tag step value" of every scalar point that
                                         TensorBoard shows, after its restart handling
Exit status 0 when every check passes.
"""
import math
import os
import struct
import sys

# ---- CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) and TFRecord's mask ----
_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _TABLE.append(_c)


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class CorruptRecord(Exception):
    pass


def records(blob):
    """Yields each TFRecord's data; raises CorruptRecord on a CRC mismatch or a cut record."""
    pos = 0
    while pos < len(blob):
        if len(blob) - pos < 12:
            raise CorruptRecord("truncated header at byte %d" % pos)
        header = blob[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (len_crc,) = struct.unpack("<I", blob[pos + 8:pos + 12])
        if len_crc != masked_crc(header):
            raise CorruptRecord("length CRC mismatch at byte %d" % pos)
        end = pos + 12 + length + 4
        if end > len(blob):
            raise CorruptRecord("truncated record at byte %d" % pos)
        data = blob[pos + 12:pos + 12 + length]
        (data_crc,) = struct.unpack("<I", blob[end - 4:end])
        if data_crc != masked_crc(data):
            raise CorruptRecord("data CRC mismatch at byte %d" % pos)
        yield data
        pos = end


# ---- protobuf wire format ----
def varint(buf, pos):
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("bad varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return result, pos


def fields(buf):
    """Yields (field number, wire type, value): int for varints, bytes for the rest."""
    pos = 0
    while pos < len(buf):
        key, pos = varint(buf, pos)
        num, wire = key >> 3, key & 7
        if wire == 0:
            val, pos = varint(buf, pos)
        elif wire == 1:
            val, pos = buf[pos:pos + 8], pos + 8
        elif wire == 5:
            val, pos = buf[pos:pos + 4], pos + 4
        elif wire == 2:
            n, pos = varint(buf, pos)
            val, pos = buf[pos:pos + n], pos + n
        else:
            raise ValueError("wire type %d" % wire)
        if pos > len(buf):
            raise ValueError("field runs past the message")
        yield num, wire, val


def f64(b):
    return struct.unpack("<d", b)[0]


def f32(b):
    return struct.unpack("<f", b)[0]


def packed_doubles(b):
    return list(struct.unpack("<%dd" % (len(b) // 8), b))


def decode_histo(buf):
    # HistogramProto: min 1, max 2, num 3, sum 4, sum_squares 5, bucket_limit 6, bucket 7 (packed)
    h = {"bucket_limit": [], "bucket": []}
    names = {1: "min", 2: "max", 3: "num", 4: "sum", 5: "sum_squares"}
    for num, wire, val in fields(buf):
        if num in names and wire == 1:
            h[names[num]] = f64(val)
        elif num == 6:
            h["bucket_limit"] += packed_doubles(val) if wire == 2 else [f64(val)]
        elif num == 7:
            h["bucket"] += packed_doubles(val) if wire == 2 else [f64(val)]
    return h


def decode_tensor(buf):
    # TensorProto: dtype 1, tensor_shape 2, string_val 8
    t = {"dtype": 0, "string_val": [], "shape": []}
    for num, wire, val in fields(buf):
        if num == 1:
            t["dtype"] = val
        elif num == 8:
            t["string_val"].append(val.decode("utf-8"))
        elif num == 2:
            for n2, _, dim in fields(val):
                if n2 == 2:
                    size = 0
                    for n3, _, v3 in fields(dim):
                        if n3 == 1:
                            size = v3
                    t["shape"].append(size)
    return t


def decode_metadata(buf):
    # SummaryMetadata: plugin_data 1 { plugin_name 1, content 2 }
    md = {"plugin_name": "", "content": b""}
    for num, _, val in fields(buf):
        if num == 1:
            for n2, _, v2 in fields(val):
                if n2 == 1:
                    md["plugin_name"] = v2.decode("utf-8")
                elif n2 == 2:
                    md["content"] = v2
    return md


def decode_value(buf):
    # Summary.Value: tag 1, simple_value 2, histo 5, tensor 8, metadata 9
    v = {}
    for num, wire, val in fields(buf):
        if num == 1:
            v["tag"] = val.decode("utf-8")
        elif num == 2 and wire == 5:
            v["simple_value"] = f32(val)
        elif num == 5:
            v["histo"] = decode_histo(val)
        elif num == 8:
            v["tensor"] = decode_tensor(val)
        elif num == 9:
            v["metadata"] = decode_metadata(val)
    return v


def decode_event(buf):
    # Event: wall_time 1, step 2, file_version 3, summary 5 { value 1 }
    e = {"wall_time": 0.0, "step": 0, "values": []}
    for num, wire, val in fields(buf):
        if num == 1 and wire == 1:
            e["wall_time"] = f64(val)
        elif num == 2 and wire == 0:
            e["step"] = val - (1 << 64) if val >= 1 << 63 else val
        elif num == 3:
            e["file_version"] = val.decode("utf-8")
        elif num == 5:
            e["values"] += [decode_value(v) for n2, _, v in fields(val) if n2 == 1]
        elif num == 7:  # session_log: SessionLog { status 1 (START = 1, STOP = 2, CHECKPOINT = 3) }
            e["session_log"] = dict(("status", v) for n2, w2, v in fields(val) if n2 == 1 and w2 == 0)
    return e


def scalars_as_tensorboard_shows(logdir):
    """The (tag, step, value) points of a run folder after TensorBoard's restart handling
    (tensorboard/backend/event_processing/event_accumulator.py, _MaybePurgeOrphanedData): with
    file_version brain.Event:2 or later, a SessionLog START at step s discards every point
    read so far at step >= s, for all tags. Event files are read in name order, as TensorBoard's
    directory loader does."""
    points, version = [], 0.0
    for name in sorted(os.listdir(logdir)):
        if "tfevents" not in name:
            continue
        for e in read_events(os.path.join(logdir, name)):
            if "file_version" in e:
                version = float(e["file_version"].split(":")[1])
            if version >= 2 and e.get("session_log", {}).get("status") == 1:
                points = [p for p in points if p[1] < e["step"]]
            for v in e["values"]:
                if "simple_value" in v:
                    points.append((v["tag"], e["step"], v["simple_value"]))
    return points


def read_events(path):
    with open(path, "rb") as f:
        blob = f.read()
    return [decode_event(r) for r in records(blob)]


def hparams_session(content):
    """HParamsPluginData.session_start_info.hparams as a dict (plugin_data.proto)."""
    out = {}
    for num, _, val in fields(content):
        if num == 3:
            for n2, _, ent in fields(val):
                if n2 != 1:
                    continue
                key, value = None, None
                for n3, _, v3 in fields(ent):
                    if n3 == 1:
                        key = v3.decode("utf-8")
                    elif n3 == 2:
                        for n4, w4, v4 in fields(v3):
                            value = f64(v4) if n4 == 2 else v4.decode("utf-8") if n4 == 3 else value
                out[key] = value
    return out


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(logdir, expected_path):
    files = sorted(f for f in os.listdir(logdir) if "tfevents" in f)
    if not files:
        fail("no event files in " + logdir)
    for f in files:
        if not f.startswith("events.out.tfevents."):
            fail("bad event file name " + f)
    events = []
    for f in files:
        evs = read_events(os.path.join(logdir, f))
        if not evs or evs[0].get("file_version") != "brain.Event:2":
            fail(f + ": first event is not file_version brain.Event:2")
        events += evs
    scalars, histos, texts, hparams = {}, {}, {}, {}
    for e in events:
        for v in e["values"]:
            if "simple_value" in v:
                scalars[(v["tag"], e["step"])] = v["simple_value"]
            if "histo" in v:
                histos[(v["tag"], e["step"])] = v["histo"]
            md = v.get("metadata")
            if md and md["plugin_name"] == "text":
                texts[(v["tag"], e["step"])] = v["tensor"]["string_val"][0]
                if v["tensor"]["dtype"] != 7 or v["tensor"]["shape"] != [1]:
                    fail("text tensor is not a DT_STRING of shape [1]")
            if md and md["plugin_name"] == "hparams" and v["tag"] == "_hparams_/session_start_info":
                hparams.update(hparams_session(md["content"]))
    n_checked = 0
    with open(expected_path) as fh:
        for line in fh:
            parts = line.rstrip("\n").split("\t")
            kind = parts[0]
            if kind == "scalar":
                tag, step, value = parts[1], int(parts[2]), float(parts[3])
                got = scalars.get((tag, step))
                if got is None or not (got == value or abs(got - value) <= 1e-6 * max(1.0, abs(value))):
                    fail("scalar %s step %d: expected %r, got %r" % (tag, step, value, got))
            elif kind == "histo":
                tag, step = parts[1], int(parts[2])
                num, mn, mx, sm, sq = map(float, parts[3:8])
                h = histos.get((tag, step))
                if h is None:
                    fail("histogram %s step %d missing" % (tag, step))
                if len(h["bucket"]) != len(h["bucket_limit"]) or not h["bucket"]:
                    fail("histogram %s: %d counts for %d limits" % (tag, len(h["bucket"]), len(h["bucket_limit"])))
                if sum(h["bucket"]) != num or h["num"] != num:
                    fail("histogram %s: counts sum to %r, num %r, expected %r" % (tag, sum(h["bucket"]), h["num"], num))
                if any(b >= a for a, b in zip(h["bucket_limit"][1:], h["bucket_limit"])):
                    fail("histogram %s: bucket limits not increasing" % tag)
                for name, want in (("min", mn), ("max", mx), ("sum", sm), ("sum_squares", sq)):
                    if not math.isclose(h[name], want, rel_tol=1e-9, abs_tol=1e-9):
                        fail("histogram %s: %s is %r, expected %r" % (tag, name, h[name], want))
                if num:  # bucket i holds [limit[i-1], limit[i]): the first and last full ones hold min and max
                    lim, cnt = h["bucket_limit"], h["bucket"]
                    full = [i for i, c in enumerate(cnt) if c > 0]
                    i, j = full[0], full[-1]
                    if not (lim[i] > mn and (i == 0 or lim[i - 1] <= mn)):
                        fail("histogram %s: min %r is not in its first non-empty bucket" % (tag, mn))
                    if not (lim[j] > mx and (j == 0 or lim[j - 1] <= mx)):
                        fail("histogram %s: max %r is not in its last non-empty bucket" % (tag, mx))
            elif kind == "text":
                tag, step, text = parts[1], int(parts[2]), parts[3]
                if texts.get((tag, step)) != text:
                    fail("text %s step %d: expected %r, got %r" % (tag, step, text, texts.get((tag, step))))
            elif kind == "hparam":
                name, value = parts[1], parts[2]
                got = hparams.get(name)
                want = float(value[1:]) if value.startswith("#") else value
                if got != want:
                    fail("hparam %s: expected %r, got %r" % (name, want, got))
            else:
                continue
            n_checked += 1
    if n_checked == 0:
        fail("nothing to check in " + expected_path)
    # A flipped byte anywhere in a record must be caught by a CRC.
    with open(os.path.join(logdir, files[0]), "rb") as f:
        blob = bytearray(f.read())
    for where in (3, len(blob) // 2, len(blob) - 2):
        bad = bytearray(blob)
        bad[where] ^= 0x20
        try:
            for _ in records(bytes(bad)):
                pass
        except CorruptRecord:
            continue
        fail("a flipped byte at %d of %d was not detected" % (where, len(blob)))
    print("tb_reader: %d events in %d files, %d expectations met, corruption detected"
          % (len(events), len(files), n_checked))


def main(argv):
    if len(argv) == 4 and argv[1] == "--check":
        try:
            check(argv[2], argv[3])
        except CorruptRecord as e:
            fail("corrupt event file: %s" % e)
        return 0
    if len(argv) == 3 and argv[1] == "--scalars":
        for tag, step, value in scalars_as_tensorboard_shows(argv[2]):
            print(tag, step, repr(value))
        return 0
    if len(argv) == 3 and argv[1] == "--dump":
        for e in read_events(argv[2]):
            print(e)
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
