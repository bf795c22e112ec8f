# A CPU loop for Debian's python3.11 (standard library only): JSON encode
# and decode, SHA-256 and BLAKE2 hashing, a little pure Python.
# usage: /usr/bin/python3.11 py_loop.py [SECONDS] (default 10)
import hashlib
import json
import sys
import time


def make_doc(i):
    return {"id": i, "name": "item-%d" % i, "tags": ["a", "b", str(i % 7)],
            "price": i * 1.25, "nested": {"k": list(range(i % 20))}}


def encode_decode(docs):
    text = json.dumps(docs, sort_keys=True)
    back = json.loads(text)
    return text, len(back)


def digest(text):
    data = text.encode()
    return hashlib.sha256(data).hexdigest() + hashlib.blake2b(data).hexdigest()


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    end = time.monotonic() + seconds
    rounds = 0
    while time.monotonic() < end:
        docs = [make_doc(rounds * 100 + i) for i in range(100)]
        text, n = encode_decode(docs)
        rounds += n + len(digest(text))
    print("rounds:", rounds)


main()
