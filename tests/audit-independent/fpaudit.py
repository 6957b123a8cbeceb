#!/usr/bin/env python3
"""An independent writer and verifier of fp audit logs, written from docs/audit-format.md alone.

Standard library only; Ed25519 goes through the `openssl` command line tool.

  fpaudit.py verify --pubkey FILE [--trusted-checkpoint FILE] SEGMENT...
      exit 0 intact, 1 problem found (printed as JSON), 2 usage/IO error
  fpaudit.py write --key FILE --out PATH --count N
      writes a fresh log of N decisions with a checkpoint every 10 and a final one
"""
import argparse
import base64
import binascii
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

DOMAIN = b"fp-audit-v1 record\n"  # 18 ASCII bytes and a newline
ZERO = "0" * 64
SUFFIX_OPEN = b',"hash":"'
SUFFIX_LEN = len(SUFFIX_OPEN) + 64 + 2
EM_DASH = "\u2014 "
PKCS8_ED25519 = bytes.fromhex("302e020100300506032b657004220420")
SPKI_ED25519 = bytes.fromhex("302a300506032b6570032100")


def openssl(args, data=None):
    return subprocess.run(["openssl"] + args, input=data, capture_output=True, check=False)


def key_hash(name, public):
    return hashlib.sha256(name.encode() + b"\n\x01" + public).digest()[:4]


def b64decode_canonical(text):
    """Standard padded base64 that re-encodes to the same text, else ValueError."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("not base64")
    if base64.b64encode(raw).decode() != text:
        raise ValueError("not canonical base64")
    return raw


def valid_key_name(name):
    return name != "" and all(0x21 <= ord(c) <= 0x7E and c != "+" for c in name)


def parse_key(text, private):
    text = text.strip()
    if private:
        if not text.startswith("PRIVATE+KEY+"):
            raise ValueError("not a private key")
        text = text[len("PRIVATE+KEY+"):]
    parts = text.split("+", 2)  # base64 may contain '+': split on the first two only
    if len(parts) != 3:
        raise ValueError("expected <name>+<hash>+<base64>")
    name, khash, blob = parts
    if not valid_key_name(name) or not is_lower_hex(khash, 8):
        raise ValueError("bad key name or key hash")
    raw = b64decode_canonical(blob)
    if len(raw) != 33 or raw[0] != 1:
        raise ValueError("not an Ed25519 key")
    return name, khash, raw[1:]


class Signer:
    def __init__(self, path):
        name, khash, seed = parse_key(open(path).read(), private=True)
        self.name = name
        self.tmp = tempfile.mkdtemp()
        self.der = os.path.join(self.tmp, "key.der")
        with open(self.der, "wb") as f:
            f.write(PKCS8_ED25519 + seed)
        out = openssl(["pkey", "-inform", "DER", "-in", self.der, "-pubout", "-outform", "DER"])
        if out.returncode != 0:
            raise RuntimeError(out.stderr.decode())
        self.public = out.stdout[-32:]
        if key_hash(name, self.public).hex() != khash:
            raise ValueError("key hash does not match the key")
        self.key_id = f"{name}+{khash}"

    def sign(self, message):
        msg = os.path.join(self.tmp, "msg")
        with open(msg, "wb") as f:
            f.write(message)
        out = openssl(["pkeyutl", "-sign", "-inkey", self.der, "-keyform", "DER", "-rawin", "-in", msg])
        if out.returncode != 0:
            raise RuntimeError(out.stderr.decode())
        return out.stdout


class Verifier:
    def __init__(self, path):
        self.name, self.khash, self.public = parse_key(open(path).read(), private=False)
        if key_hash(self.name, self.public).hex() != self.khash:
            raise ValueError("key hash does not match the key")
        self.key_id = f"{self.name}+{self.khash}"
        self.tmp = tempfile.mkdtemp()
        self.der = os.path.join(self.tmp, "pub.der")
        with open(self.der, "wb") as f:
            f.write(SPKI_ED25519 + self.public)

    def verify(self, message, signature):
        msg, sig = os.path.join(self.tmp, "msg"), os.path.join(self.tmp, "sig")
        with open(msg, "wb") as f:
            f.write(message)
        with open(sig, "wb") as f:
            f.write(signature)
        out = openssl(["pkeyutl", "-verify", "-pubin", "-inkey", self.der, "-keyform", "DER",
                       "-rawin", "-in", msg, "-sigfile", sig])
        return out.returncode == 0


def note_body(origin, size, root):
    return f"{origin}\n{size}\n{base64.b64encode(root).decode()}\n"


class NoteError(ValueError):
    """kind: 'malformed', 'missing-signature' or 'bad-signature'."""
    def __init__(self, kind, detail=""):
        super().__init__(detail or kind)
        self.kind = kind


def parse_note(note):
    """Returns (origin, size, root bytes, signed body, [(name, blob)]) or raises NoteError."""
    split = note.find("\n\n")
    if split < 0:
        raise NoteError("malformed", "no blank line")
    body, sigs = note[:split + 1], note[split + 2:]
    lines = body[:-1].split("\n")
    if len(lines) < 3 or lines[0] == "":
        raise NoteError("malformed", "expected origin, size, root")
    origin, size, root = lines[0], lines[1], lines[2]  # later lines: extension lines
    if not (size.isascii() and size.isdigit()) or (size != "0" and size.startswith("0")):
        raise NoteError("malformed", "size")
    size = int(size)
    if size > U64:
        raise NoteError("malformed", "size")
    try:
        root = b64decode_canonical(root)
    except ValueError:
        raise NoteError("malformed", "root")
    if len(root) != 32:
        raise NoteError("malformed", "root")
    if not sigs.endswith("\n"):
        raise NoteError("malformed", "no final newline")
    signatures = []
    for line in sigs[:-1].split("\n"):
        if not line.startswith(EM_DASH) or " " not in line[len(EM_DASH):]:
            raise NoteError("malformed", "signature line")
        name, blob = line[len(EM_DASH):].split(" ", 1)
        try:
            blob = b64decode_canonical(blob)
        except ValueError:
            raise NoteError("malformed", "signature base64")
        if not valid_key_name(name) or len(blob) < 4:
            raise NoteError("malformed", "signature line")
        signatures.append((name, blob))
    return origin, size, root, body, signatures


def check_note(note, verifier):
    """Returns (origin, size, root bytes); raises NoteError."""
    origin, size, root, body, signatures = parse_note(note)
    found = False
    for name, blob in signatures:
        if name != verifier.name or len(blob) != 68 or blob[:4].hex() != verifier.khash:
            continue
        found = True
        if verifier.verify(body.encode(), blob[4:]):
            return origin, size, root
    raise NoteError("bad-signature" if found else "missing-signature")


def note_from_sink(text):
    """The note in a sink file, or in syslog lines 'fp-audit checkpoint <note, newlines as | >'."""
    marker = "fp-audit checkpoint "
    lines = [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]
    hits = [line for line in lines if marker in line]
    if not hits:
        return text
    flat = hits[-1][hits[-1].index(marker) + len(marker):].rstrip()
    if flat.endswith(" |"):
        flat = flat[:-2]
    return flat.replace(" | ", "\n").replace(" |", "\n") + "\n"


def seal(members):
    """Serializes members (a list of (name, value)) as a sealed line; returns (line, hash hex)."""
    s = "{" + ",".join(json.dumps(k) + ":" + json.dumps(v, ensure_ascii=False, separators=(",", ":"))
                       for k, v in members)
    s = s.encode()
    h = hashlib.sha256(DOMAIN + s).hexdigest()
    return s + SUFFIX_OPEN + h.encode() + b'"}\n', h


def now():
    ns = time.time_ns()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 10**9)) + f".{ns % 10**9:09d}Z"


def write(args):
    signer = Signer(args.key)
    log_id = os.urandom(16).hex()
    origin = "fp.audit/" + log_id
    prev, seq = ZERO, 0
    boot_id = open("/proc/sys/kernel/random/boot_id").read().strip()
    host = socket.gethostname()
    with open(args.out, "xb") as out:
        def emit(kind, fields):
            nonlocal prev, seq
            members = [("kind", kind), ("v", 1), ("seq", seq)] + fields + [
                ("time", now()), ("mono_ns", time.monotonic_ns()), ("boot_id", boot_id),
                ("host", host), ("prev", prev)]
            line, prev = seal(members)
            out.write(line)
            seq += 1

        def checkpoint():
            root = bytes.fromhex(prev)
            body = note_body(origin, seq, root)
            sig = base64.b64encode(key_hash(signer.name, signer.public) + signer.sign(body.encode()))
            note = f"{body}\n{EM_DASH}{signer.name} {sig.decode()}\n"
            emit("checkpoint", [("size", seq), ("root", prev), ("note", note)])

        emit("log-open", [("log_id", log_id), ("key_id", signer.key_id), ("segment", 0),
                          ("writer", "fpaudit.py")])
        for i in range(args.count):
            raw = f"/work/indep-{i}".encode() + (b"\xff" if i % 3 == 0 else b"")
            try:
                path = raw.decode()
            except UnicodeDecodeError:
                path = {"b64": base64.b64encode(raw).decode()}
            emit("decision", [
                ("session", "indep"), ("agent", "python"), ("cgroup", 1), ("pid", 42), ("tgid", 42),
                ("uid", 0), ("gid", 0), ("comm", "python3"), ("exe", "/usr/bin/python3"),
                ("op", "write" if i % 2 else "read"), ("hook", "file_open"), ("path", path),
                ("dev", 1), ("ino", i), ("decision", "deny" if i % 4 == 0 else "allow"),
                ("rule", "independent"), ("rule_source", "fpaudit.py"), ("policy_hash", "none")])
            if (i + 1) % 10 == 0:
                checkpoint()
        checkpoint()
    return 0


U64, U32, I32_MIN, I32_MAX = 2**64 - 1, 2**32 - 1, -2**31, 2**31 - 1
WINDOW = 64
OPS = {"read", "write", "create", "delete", "rename", "exchange", "link", "exec", "setattr"}
DECISIONS = {"allow", "deny", "prompt-approved", "prompt-denied", "prompt-timed-out"}
COMMON = [("v", "u64"), ("seq", "u64"), ("kind", "str"), ("time", "str"), ("mono_ns", "u64"),
          ("boot_id", "str"), ("host", "str"), ("prev", "hex64"), ("hash", "hex64")]
KINDS = {
    "decision": [("session", "str", 1), ("agent", "str", 1), ("cgroup", "u64", 1),
                 ("pid", "u32", 1), ("tgid", "u32", 1), ("uid", "u32", 1), ("gid", "u32", 1),
                 ("comm", "str", 1), ("exe", "path", 1), ("op", OPS, 1), ("hook", "str", 1),
                 ("path", "path", 1), ("target_path", "path", 0), ("directory", "bool", 0), ("target_exists", "bool", 0),
                 ("target_pid", "u32", 0), ("target_cgroup", "u64", 0), ("dev", "u64", 1),
                 ("ino", "u64", 1), ("decision", DECISIONS, 1), ("rule", "str", 1),
                 ("rule_source", "str", 1), ("policy_hash", "str", 1), ("approver", "str", 0),
                 ("reason", "str", 0)],
    "session-start": [("session", "str", 1), ("agent", "str", 1), ("cgroup", "u64", 1),
                      ("pid", "u32", 1), ("uid", "u32", 1), ("policy_hash", "str", 1),
                      ("floor_exceptions", "strs", 1), ("profile", "str", 0),
                      ("backend", {"bpf_lsm", "fmod_ret"}, 0), ("command", "strs", 1)],
    "session-end": [("session", "str", 1), ("agent", "str", 1), ("exit_code", "i32", 0),
                    ("reason", "str", 1)],
    "session-adopt": [("session", "str", 1), ("agent", "str", 1), ("cgroup", "u64", 1),
                      ("pids", "u32", 1), ("policy_hash", "str", 1)],
    "orphan-cleanup": [("session", "str", 1), ("pid", "u32", 1), ("cgroup", "u64", 0),
                       ("pids", "u32", 1), ("outcome", {"removed", "kept"}, 1),
                       ("reason", "str", 0)],
    "enforcement": [("backend", {"bpf_lsm", "fmod_ret"}, 1), ("state", {"off", "on"}, 1),
                    ("reason", "str", 1)],
    "policy-reload": [("session", "str", 0), ("old_policy_hash", "str", 1),
                      ("policy_hash", "str", 1), ("source", "str", 1)],
    "loss": [("count", "u64", 1), ("at", "str", 1)],
    "log-open": [("log_id", "hex32", 1), ("key_id", "keyid", 1), ("segment", "u64", 1),
                 ("writer", "str", 1)],
    "daemon-restart": [("key_id", "keyid", 1), ("writer", "str", 1)],
    "recovery": [("torn_file", "str", 1), ("torn_size", "u64", 1), ("torn_sha256", "hex64", 1)],
    "checkpoint": [("size", "u64", 1), ("root", "hex64", 1), ("note", "str", 1)],
}


def is_lower_hex(text, n):
    return isinstance(text, str) and len(text) == n and all(c in "0123456789abcdef" for c in text)


def is_int(x, lo, hi):
    return type(x) is int and lo <= x <= hi


def has_type(x, ty):
    if isinstance(ty, set):
        return isinstance(x, str) and x in ty
    if ty == "u64":
        return is_int(x, 0, U64)
    if ty == "u32":
        return is_int(x, 0, U32)
    if ty == "i32":
        return is_int(x, I32_MIN, I32_MAX)
    if ty == "str":
        return isinstance(x, str)
    if ty == "bool":
        return isinstance(x, bool)
    if ty == "strs":
        return isinstance(x, list) and all(isinstance(i, str) for i in x)
    if ty == "hex64":
        return is_lower_hex(x, 64)
    if ty == "hex32":
        return is_lower_hex(x, 32)
    if ty == "keyid":
        if not isinstance(x, str) or "+" not in x:
            return False
        name, khash = x.split("+", 1)
        return valid_key_name(name) and is_lower_hex(khash, 8)
    if ty == "path":
        if isinstance(x, str):
            return True
        if isinstance(x, dict) and list(x) == ["b64"] and isinstance(x["b64"], str):
            try:
                b64decode_canonical(x["b64"])
                return True
            except ValueError:
                return False
        return False
    raise AssertionError(ty)


def _pairs(pairs):
    obj = {}
    for k, v in pairs:
        if k in obj:
            raise ValueError(f"duplicate member {k!r}")
        obj[k] = v
    return obj


def _no_constants(name):
    raise ValueError(f"{name} is not JSON")


def _check_strings(x):
    """Rejects unpaired surrogates (valid JSON escapes that are not Unicode)."""
    if isinstance(x, str):
        x.encode("utf-8")
    elif isinstance(x, list):
        for i in x:
            _check_strings(i)
    elif isinstance(x, dict):
        for k, v in x.items():
            _check_strings(k)
            _check_strings(v)


def parse_record(line):
    """Step 3: returns (record dict, known kind) or raises ValueError."""
    try:
        # "-0" is not an integer (it reads as a float), like any number with '.' or an exponent.
        rec = json.loads(line.decode("utf-8"), object_pairs_hook=_pairs,
                         parse_constant=_no_constants,
                         parse_int=lambda t: float(t) if t == "-0" else int(t))
        _check_strings(rec)
    except (UnicodeError, ValueError) as e:
        raise ValueError(str(e))
    if not isinstance(rec, dict):
        raise ValueError("not a JSON object")
    for name, ty in COMMON:
        if name not in rec or not has_type(rec[name], ty):
            raise ValueError(f"member {name} missing or mistyped")
    if rec["v"] != 1:
        raise ValueError("unsupported version")
    members = KINDS.get(rec["kind"])
    if members is None:
        return rec, False
    for name, ty, required in members:
        if name not in rec:
            if required:
                raise ValueError(f"{rec['kind']} without {name}")
        elif not has_type(rec[name], ty):
            raise ValueError(f"{rec['kind']}: {name} mistyped")
    return rec, True


def split_suffix(line):
    """Step 1: (S, stored hash hex) or None."""
    if len(line) < SUFFIX_LEN or line[-SUFFIX_LEN:-66] != SUFFIX_OPEN or line[-2:] != b'"}':
        return None
    digits = line[-66:-2].decode("latin-1")
    if not is_lower_hex(digits, 64):
        return None
    return line[:-SUFFIX_LEN], digits


def peek(line, terminated):
    """A look-ahead line: (stored hash, prev) if it passes steps 1 and 3 (not step 2)."""
    split = split_suffix(line)
    if split is None or not terminated:
        return None
    try:
        rec, _ = parse_record(line)
    except ValueError:
        return None
    return split[1], rec["prev"]


def segment_order(paths):
    """Chain order: rotated files <base>.<20 digits> by number, then the active file."""
    keyed = set()
    for path in paths:
        base, dot, digits = path.rpartition(".")
        if dot and len(digits) == 20 and digits.isascii() and digits.isdigit() and base:
            keyed.add((base, int(digits), path))
            continue
        directory = os.path.dirname(path) or "."
        name = os.path.basename(path)
        rotated = False
        for entry in os.listdir(directory):
            stem, dot, digits = entry.rpartition(".")
            if stem == name and len(digits) == 20 and digits.isascii() and digits.isdigit():
                keyed.add((path, int(digits), os.path.join(os.path.dirname(path), entry)))
                rotated = True
        # An absent active file after rotated ones: a writer stopped while rotating.
        if not rotated or os.path.lexists(path):
            keyed.add((path, U64 + 1, path))
    return [path for _, _, path in sorted(keyed, key=lambda k: (k[0].encode(), k[1]))]


def name_seq(path):
    _, dot, digits = os.path.basename(path).rpartition(".")
    if dot and len(digits) == 20 and digits.isascii() and digits.isdigit():
        return int(digits)
    return None


def split_lines(data):
    """[(offset, line without \n, terminated)]."""
    out, offset = [], 0
    while offset < len(data):
        end = data.find(b"\n", offset)
        if end < 0:
            out.append((offset, data[offset:], False))
            break
        out.append((offset, data[offset:end], True))
        offset = end + 1
    return out


def verify(args):
    verifier = Verifier(args.pubkey) if args.pubkey else None
    trusted = None
    if args.trusted_checkpoint:
        if verifier is None:
            raise ValueError("--trusted-checkpoint needs --pubkey")
        trusted = check_note(note_from_sink(open(args.trusted_checkpoint).read()), verifier)
    paths = segment_order(args.segments)
    if not paths:
        raise ValueError("no segments")
    segs = []
    for path in paths:
        with open(path, "rb") as f:
            segs.append((path, split_lines(f.read()), os.path.getsize(path)))
    warnings = []
    warned = set()
    if verifier is None:
        warnings.append("no public key given")
    st = {"expected": 0, "head": ZERO, "start": None, "records": 0, "log_id": None,
          "key_ids": [], "checkpoints": 0, "verified": 0, "last_cp": None, "last_was_cp": False,
          "last_segment_number": None, "trusted_at": None}
    recent = []  # (hash, seq, segment index, line, offset)
    seg_records = [0] * len(segs)

    def report(problem):
        exit_code = 0
        if problem is not None:
            exit_code = {"torn-tail": 3, "wrong-key": 2}.get(problem["class"], 1)
        elif warnings:
            exit_code = 3
        print(json.dumps({"ok": exit_code in (0, 3), "exit_code": exit_code, "problem": problem,
                          "warnings": warnings, "records": st["records"],
                          "checkpoints": st["checkpoints"], "log_id": st["log_id"],
                          "key_ids": st["key_ids"]}))
        return exit_code

    def problem_at(cls, seg, lineno, offset, seq, detail):
        return {"class": cls, "segment": segs[seg][0], "line": lineno, "offset": offset,
                "seq": seq, "detail": detail}

    def warn_once(key, text):
        if key not in warned:
            warned.add(key)
            warnings.append(text)

    def note_key_id(key_id):
        if key_id not in st["key_ids"]:
            st["key_ids"].append(key_id)
        reference = verifier.key_id if verifier else st["key_ids"][0]
        if key_id != reference:
            warn_once("key " + key_id, f"another key id {key_id}")

    def look_ahead(si, li):
        out = []
        for sj in range(si, len(segs)):
            start = li + 1 if sj == si else 0
            for _, line, terminated in segs[sj][1][start:]:
                if len(out) == WINDOW:
                    return out
                p = peek(line, terminated)
                if p is None:
                    return out
                out.append(p)
        return out

    def classify(si, li, rec, claimed):
        seq, prev = rec["seq"], rec["prev"]
        if any(h == claimed for h, *_ in recent):
            return "seq-gap-or-duplicate", None
        for i in range(len(recent) - 1, -1, -1):
            if recent[i][0] == prev:
                return "inserted-record", recent[i + 1]
        ahead = look_ahead(si, li)
        if any(h == prev for h, _ in ahead):
            return "reordered-records", None
        if ahead and ahead[0][1] == st["head"]:
            return "inserted-record", None
        if seq > st["expected"]:
            return "deleted-record", None
        if recent:
            return "modified-record", recent[-1]
        return "modified-record", None

    def check_kind(rec, known, lineno):
        kind = rec["kind"]
        is_open = kind == "log-open"
        if lineno == 1 and not is_open:
            return "malformed-line"
        if lineno > 1 and is_open:
            return "malformed-line"
        if is_open and st["records"] > 0 and not st["last_was_cp"]:
            return "malformed-line"
        if not known:
            warn_once("kind " + kind, f"unknown kind {kind}")
            return None
        if is_open:
            last = st["last_segment_number"]
            want = last + 1 if last is not None else (0 if rec["seq"] == 0 else None)
            if want is not None and rec["segment"] != want:
                return "malformed-line"
            st["last_segment_number"] = rec["segment"]
            if st["log_id"] is None:
                st["log_id"] = rec["log_id"]
            elif st["log_id"] != rec["log_id"]:
                return "fork"
            note_key_id(rec["key_id"])
        elif kind == "daemon-restart":
            note_key_id(rec["key_id"])
        elif kind == "checkpoint":
            st["checkpoints"] += 1
            if rec["size"] != rec["seq"] or rec["root"] != st["head"]:
                return "fork"
            try:
                if verifier:
                    origin, size, root = check_note(rec["note"], verifier)
                    st["verified"] += 1
                else:
                    origin, size, root, _, _ = parse_note(rec["note"])
            except NoteError as e:
                if e.kind == "missing-signature" and verifier.key_id not in st["key_ids"]:
                    return "wrong-key"  # a key mix-up: the log cannot be verified with it
                return "malformed-line" if e.kind == "malformed" else e.kind
            if origin != "fp.audit/" + str(st["log_id"]) or size != rec["size"] \
                    or root.hex() != rec["root"]:
                return "fork"
        elif kind in ("loss", "recovery") or (kind == "enforcement" and rec["state"] == "off"):
            warnings.append(f"seq {rec['seq']}: {kind}")
        return None

    torn = None
    for si, (path, lines, size) in enumerate(segs):
        if size == 0:
            warnings.append(f"empty segment {path}")
        last_segment = si == len(segs) - 1
        for li, (offset, line, terminated) in enumerate(lines):
            lineno = li + 1

            def fail(cls, detail=""):
                return problem_at(cls, si, lineno, offset, st["expected"], detail)

            if not terminated:
                if last_segment:
                    torn = fail("torn-tail")
                    break
                return report(fail("malformed-line", "no newline"))
            split = split_suffix(line)
            if split is None:
                return report(fail("malformed-line", "no hash suffix"))
            s, claimed = split
            if hashlib.sha256(DOMAIN + s).hexdigest() != claimed:
                return report(fail("modified-record"))
            try:
                rec, known = parse_record(line)
            except ValueError as e:
                return report(fail("malformed-line", str(e)))
            if st["start"] is None:
                if rec["kind"] == "log-open" and rec["seq"] > 0:
                    warnings.append("older segments retired")
                    st["head"], st["expected"] = rec["prev"], rec["seq"]
                st["start"] = st["expected"]
            if rec["prev"] != st["head"]:
                cls, at = classify(si, li, rec, claimed)
                if at is None:
                    return report(fail(cls))
                return report(problem_at(cls, at[2], at[3], at[4], at[1], ""))
            if rec["seq"] != st["expected"]:
                return report(fail("seq-gap-or-duplicate"))
            if lineno == 1 and name_seq(path) not in (None, rec["seq"]):
                warnings.append(f"{path} is named for another seq")
            cls = check_kind(rec, known, lineno)
            if cls:
                return report(fail(cls))
            if trusted and trusted[1] == rec["seq"] + 1:
                st["trusted_at"] = (claimed, rec["seq"], si, lineno, offset)
            st["records"] += 1
            seg_records[si] += 1
            st["head"] = claimed
            st["expected"] += 1
            recent.append((claimed, rec["seq"], si, lineno, offset))
            del recent[:-WINDOW]
            st["last_was_cp"] = rec["kind"] == "checkpoint"
            if st["last_was_cp"]:
                st["last_cp"] = rec["seq"]
        if torn:
            break
    # End of the walk.
    total = st["expected"]
    start = st["start"] or 0
    if st["records"] == 0:
        warnings.append("empty log")
    if name_seq(segs[-1][0]) is not None:
        warnings.append(f"the walk ends with rotated segment {segs[-1][0]}")
    unsealed = total - st["last_cp"] - 1 if st["last_cp"] is not None else total - start
    if unsealed:
        warnings.append(f"{unsealed} unsealed record(s)")
    problem = None
    if trusted:
        origin, size, root = trusted
        last = len(segs) - 1
        end = problem_at("truncated", last, seg_records[last] + 1,
                         torn["offset"] if torn else segs[last][2], total, "")
        if origin != "fp.audit/" + str(st["log_id"]):
            problem = dict(end, **{"class": "fork"})
        elif size > total:
            problem = end
        elif size == 0:
            pass
        elif size - 1 < start:
            problem = problem_at("deleted-record", 0, 1, 0, start, "")
        elif st["trusted_at"] is None:
            problem = dict(end, **{"class": "fork"})
        elif st["trusted_at"][0] != root.hex():
            at = st["trusted_at"]
            problem = problem_at("fork", at[2], at[3], at[4], at[1], "")
    return report(problem or torn)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("verify")
    v.add_argument("--pubkey")
    v.add_argument("--trusted-checkpoint")
    v.add_argument("segments", nargs="+")
    w = sub.add_parser("write")
    w.add_argument("--key", required=True)
    w.add_argument("--out", required=True)
    w.add_argument("--count", type=int, default=100)
    args = parser.parse_args()
    try:
        return verify(args) if args.command == "verify" else write(args)
    except (OSError, ValueError, RuntimeError) as e:
        print(f"fpaudit.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
