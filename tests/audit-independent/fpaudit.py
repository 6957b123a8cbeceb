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
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

DOMAIN = b"fp-audit-v1 record\n"
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


def parse_key(text, private):
    text = text.strip()
    if private:
        if not text.startswith("PRIVATE+KEY+"):
            raise ValueError("not a private key")
        text = text[len("PRIVATE+KEY+"):]
    name, khash, blob = text.split("+", 2)
    raw = base64.b64decode(blob)
    if raw[0] != 1 or len(raw) != 33:
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


def check_note(note, verifier):
    """Returns (origin, size, root bytes) or raises ValueError naming the problem."""
    body, sep, sigs = note.partition("\n\n")
    if not sep:
        raise ValueError("malformed note")
    lines = body.split("\n")
    origin, size, root = lines[0], int(lines[1]), base64.b64decode(lines[2])
    found = False
    for line in sigs.splitlines():
        if not line.startswith(EM_DASH):
            raise ValueError("malformed signature line")
        name, blob = line[len(EM_DASH):].split(" ", 1)
        blob = base64.b64decode(blob)
        if name != verifier.name or blob[:4].hex() != verifier.khash:
            continue
        found = True
        if verifier.verify((body + "\n").encode(), blob[4:]):
            return origin, size, root
    raise ValueError("bad signature" if found else "missing signature")


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


def verify(args):
    verifier = Verifier(args.pubkey)
    trusted = None
    if args.trusted_checkpoint:
        trusted = check_note(open(args.trusted_checkpoint).read(), verifier)
    prev, seq, log_id, checkpoints, trusted_head = ZERO, 0, None, 0, None

    def fail(cls, path, lineno, detail):
        print(json.dumps({"ok": False, "class": cls, "segment": path, "line": lineno,
                          "seq": seq, "detail": detail}))
        return 1

    for path in args.segments:
        data = open(path, "rb").read()
        lines = data.split(b"\n")
        torn = lines.pop()  # after the final newline: empty unless torn
        for lineno, line in enumerate(lines, 1):
            if len(line) < SUFFIX_LEN or line[-SUFFIX_LEN:-66] != SUFFIX_OPEN or line[-2:] != b'"}':
                return fail("malformed-line", path, lineno, "no hash suffix")
            s, claimed = line[:-SUFFIX_LEN], line[-66:-2].decode()
            if hashlib.sha256(DOMAIN + s).hexdigest() != claimed:
                return fail("modified-record", path, lineno, "hash mismatch")
            try:
                rec = json.loads(line)
            except ValueError as e:
                return fail("malformed-line", path, lineno, str(e))
            if rec.get("v") != 1:
                return fail("malformed-line", path, lineno, "version")
            if rec["prev"] != prev:
                return fail("broken-link", path, lineno, "prev does not match")
            if rec["seq"] != seq:
                return fail("seq-gap-or-duplicate", path, lineno, "seq")
            if rec["kind"] == "log-open":
                if log_id is None:
                    log_id = rec["log_id"]
                elif log_id != rec["log_id"]:
                    return fail("fork", path, lineno, "log id changes")
            if rec["kind"] == "checkpoint":
                try:
                    origin, size, root = check_note(rec["note"], verifier)
                except ValueError as e:
                    return fail(str(e).replace(" ", "-"), path, lineno, str(e))
                if (size != seq or rec["size"] != seq or root.hex() != prev or rec["root"] != prev
                        or origin != "fp.audit/" + str(log_id)):
                    return fail("fork", path, lineno, "checkpoint names another head")
                checkpoints += 1
            prev = claimed
            seq += 1
            if trusted and trusted[1] == seq:
                trusted_head = claimed
        if torn:
            return fail("torn-tail", path, len(lines) + 1, "no final newline")
    if trusted:
        if trusted[1] > seq:
            return fail("truncated", args.segments[-1], 0, "shorter than the trusted checkpoint")
        if trusted[1] > 0 and trusted_head != trusted[2].hex():
            return fail("fork", args.segments[-1], 0, "trusted checkpoint names another head")
    print(json.dumps({"ok": True, "records": seq, "checkpoints": checkpoints, "log_id": log_id}))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("verify")
    v.add_argument("--pubkey", required=True)
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
