"""Chat-template parity: nibble's nb_chat_apply against llama.cpp's llama_chat_apply_template
(llama-cpp-python's build of the pinned llama.cpp) on the same messages.

Part 1: every template nibble names (llama.cpp's names; "dots1", which llama.cpp only detects, is
given to llama.cpp as a text it detects), over many conversations: with and without a system
message, 1 to 6 turns, ending on a user or an assistant turn, empty contents, padding that some
templates trim, unicode, other roles, add_ass on and off. Each (template, conversation, add_ass)
is one check: the rendered bytes must be identical.
Part 2: every template file in llama.cpp's models/templates (the tree scripts/fetch-llama-src.sh
unpacks): nibble must recognize it exactly when llama.cpp does, and render a conversation of it as
llama.cpp renders it from the file's text. The last line is "N passed, N failed".
"""
import ctypes
import glob
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from nbctypes import ROOT, chat_apply, chat_detect, load_lib  # noqa: E402
from tally import Tally  # noqa: E402

from llama_cpp import llama_cpp as L  # noqa: E402

CONTENTS = ["Hello", "", " padded  ", "\n\nleading lines", "trailing lines\n\n", "unicode: é ü 中文 🙂 Ассистент",
            "tabs\tand\r\nbreaks", "[INST] markup <|im_start|> inside", "A longer message, with punctuation; "
            "and a second clause.", " ", "x" * 300]
DETECTED_ONLY = {"dots1": b"<|endofuserprompt|>"}  # names llama.cpp does not accept: a text it detects


def llama_apply(tmpl, msgs, add_ass):
    arr = (L.llama_chat_message * max(len(msgs), 1))(*[L.llama_chat_message(r, c) for r, c in msgs])
    n = L.llama_chat_apply_template(tmpl, arr, len(msgs), add_ass, None, 0)
    if n < 0:
        return None
    buf = ctypes.create_string_buffer(n + 1)
    L.llama_chat_apply_template(tmpl, arr, len(msgs), add_ass, buf, n + 1)
    return buf.raw[:n]


def conversations(rng, count):
    """Message lists [(role, content)] as bytes: fixed shapes first, then random ones."""
    out = [[], [(b"system", b"Be brief.")], [(b"user", b"Hi")], [(b"system", b" sys "), (b"user", b" u ")]]
    for _ in range(count):
        msgs = []
        if rng.random() < 0.5:
            msgs.append(("system", rng.choice(CONTENTS)))
            if rng.random() < 0.1:
                msgs.append(("system", rng.choice(CONTENTS)))
        turns = rng.randint(1, 6)
        for t in range(turns):
            msgs.append(("user", rng.choice(CONTENTS)))
            if t < turns - 1 or rng.random() < 0.4:
                msgs.append(("assistant", rng.choice(CONTENTS)))
        if rng.random() < 0.15:
            msgs.insert(rng.randrange(len(msgs) + 1), (rng.choice(["tool", "model", "assistant_tool_call", ""]),
                                                       rng.choice(CONTENTS)))
        out.append([(r.encode(), c.encode()) for r, c in msgs])
    return out


def main():
    t = Tally(verbose="-v" in sys.argv)
    lib = load_lib()
    names = [lib.nb_chat_template_name(i).decode() for i in range(lib.nb_chat_template_count())]
    convs = conversations(random.Random(20261201), 60)
    for name in names:
        tmpl = DETECTED_ONLY.get(name, name.encode())
        tid = lib.nb_chat_template_find(name.encode())
        same = total = 0
        for msgs in convs:
            for add_ass in (False, True):
                want = llama_apply(tmpl, msgs, add_ass)
                got = chat_apply(lib, tid, msgs, add_ass)
                total += 1
                same += got == want
                t.check(got == want, f"{name} add_ass={int(add_ass)} {msgs[:3]}...",
                        f"\n  nibble   {got!r}\n  llama.cpp {want!r}")
        print(f"{name:18s} {same}/{total} identical")
    try:
        tree = subprocess.run(["bash", os.path.join(ROOT, "scripts", "fetch-llama-src.sh")], check=True,
                              capture_output=True, text=True, cwd=ROOT).stdout.strip().splitlines()[-1]
        files = sorted(glob.glob(os.path.join(ROOT, tree, "models", "templates", "*.jinja")))
    except (subprocess.CalledProcessError, IndexError):
        files = []
    if not files:
        t.skip("template files", "no llama.cpp tree (scripts/fetch-llama-src.sh)")
    known = 0
    for path in files:
        text = open(path, "rb").read()
        tid = chat_detect(lib, text)
        for msgs in convs[:12]:
            want = llama_apply(text, msgs, True)
            got = None if tid is None else chat_apply(lib, tid, msgs, True)
            t.check(got == want, os.path.basename(path), f"\n  nibble   {got!r}\n  llama.cpp {want!r}")
        known += tid is not None
    if files:
        print(f"{len(files)} template files, {known} recognized (as llama.cpp recognizes them)")
    return t.summary()


if __name__ == "__main__":
    sys.exit(main())
