"""vlmcrafter.session.Session against a live `vlm-eval serve-env`, document for document.

    CRAFTER_ENV_URL=http://ADDR PYTHON tests/python/test_session_parity.py

PYTHON is an interpreter with the vlm-eval wheel installed (scripts/openrlhf_check.sh runs it
in the OpenRLHF venv). The server is the oracle: for the same seeds, options and model replies
(valid tool calls, markers, free text, garbage, a cut tool call, actions by name) every create
and step document must equal the server's: every key and value but the session id, with each
frame's pixels equal to the server's PNG. Frames are compared at every executed step
(`frames: "all"`). Plain asserts; exits non-zero on the first failure.
"""

import base64
import io
import json
import os
import sys
import urllib.error
import urllib.request

import numpy as np
from PIL import Image

from vlmcrafter.session import INVALID_NOTE, Session, SessionOver

REPLIES = [
    '<tool_call>\n{"name": "interact_many", "arguments": {"actions": ["move_left", "do"]}}\n</tool_call>',
    "The tree is north.\nACTION: move_up\nACTION: do",
    "I am not sure what to do.",
    '<tool_call>{"name": "interact_many", "arguments": {"actions": ["do", "do", "move_right", "do", "do", "do", "do", "do", "noop", "noop"]}}</tool_call>',
    "ACTION: Move West",
    "\x00\x01 }{ not json [[[",
    '{"actions": ["place_table", "make_wood_pickaxe", "sleep"',
    "",
    "1. move_down\n2. do\n3. collect wood",
    "<think>no</think>",
]
# (seed, create options, parser): tool and text protocols, both observation formats, a short
# game that ends inside a reply's action list, strict judging, extreme seeds.
CASES = [
    (3, {}, None),
    (8, {"length": 6}, None),
    (0, {"protocol": "text", "obs_format": "balrog"}, None),
    (-1, {"max_actions": 3, "image_size": 90}, None),
    (123456789012, {"length": 40}, "strict"),
    (5, {"protocol": "text"}, "balrog"),
]


def http(method, url, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def pixels(b64):
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(b64))).convert("RGB"))


def same(server, local, where):
    """Equal documents: frames by pixels, BALROG's split texts (server only) left aside."""
    server, local = dict(server), dict(local)
    server.pop("id"), local.pop("id")
    server.pop("balrog", None)
    png, frame = server.pop("frame_png_b64", None), local.pop("frame", None)
    assert (png is None) == (frame is None), f"{where}: one side has a frame"
    if png is not None:
        assert frame.dtype == np.uint8 and np.array_equal(pixels(png), frame), f"{where}: frame differs"
    pngs, frames = server.pop("frames_png_b64", None), local.pop("frames", None)
    assert (pngs is None) == (frames is None), f"{where}: one side has frames"
    if pngs is not None:
        assert len(pngs) == len(frames), where
        for k, (p, f) in enumerate(zip(pngs, frames)):
            assert np.array_equal(pixels(p), f), f"{where}: frame {k} differs"
    if server != local:
        for k in sorted(set(server) | set(local)):
            if server.get(k) != local.get(k):
                print(f"{where}: {k}: server {server.get(k)!r} != local {local.get(k)!r}", file=sys.stderr)
        raise AssertionError(f"{where}: documents differ")


def main():
    url = os.environ.get("CRAFTER_ENV_URL", "").rstrip("/")
    if not url:
        print("set CRAFTER_ENV_URL to a running `vlm-eval serve-env` address", file=sys.stderr)
        return 2
    status, info = http("GET", url + "/v1/info")
    assert status == 200, info
    # The same textures on both sides: the server's built-in sprites, or crafter's (found as the
    # server found them; never fetched here).
    textures = "builtin" if info["textures"] == "builtin" else None
    steps = invalid = 0
    for seed, options, parser in CASES:
        body = {"seed": seed, **options}
        if parser:
            body["parser"] = parser
        status, created = http("POST", url + "/v1/sessions", body)
        assert status == 200, created
        local = Session(seed, textures=textures, fetch=False, **options, **({"parser": parser} if parser else {}))
        where = f"seed {seed} {options} {parser or 'lenient'}"
        same(created, local.reset(), f"{where} create")
        sid = created["id"]
        for turn, text in enumerate(REPLIES, start=1):
            status, remote = http("POST", f"{url}/v1/sessions/{sid}/step", {"text": text, "frames": "all"})
            assert status == 200, remote
            mine = local.step(text, frames="all")
            same(remote, mine, f"{where} turn {turn}")
            steps += len(mine["actions"])
            invalid += mine["invalid"]
            assert mine["note"] == (INVALID_NOTE if mine["invalid"] else None)
            if mine["done"]:
                break
        if not local.done:
            status, remote = http("POST", f"{url}/v1/sessions/{sid}/step", {"actions": ["noop", 5, " do "]})
            assert status == 200, remote
            same(remote, local.step(actions=["noop", 5, " do "], frames="last"), f"{where} actions")
            # Play the game out (short lengths) or stop here.
        if options.get("length"):
            while not local.done:
                status, remote = http("POST", f"{url}/v1/sessions/{sid}/step", {"actions": ["noop"] * 50, "frames": "none"})
                assert status == 200, remote
                same(remote, local.step(actions=["noop"] * 50, frames="none"), f"{where} to the end")
            status, refused = http("POST", f"{url}/v1/sessions/{sid}/step", {"text": "do"})
            assert status == 409, refused
            try:
                local.step("do")
                raise AssertionError("a finished session stepped")
            except SessionOver as e:
                assert "the episode is over (length at step" in str(e), e
        status, closed = http("DELETE", f"{url}/v1/sessions/{sid}")
        assert status == 200, closed
        mine = local.close()
        assert {k: mine[k] for k in ("closed", "step")} == {k: closed[k] for k in ("closed", "step")}
        print(f"session parity: {where}: same documents", flush=True)
    assert invalid > 0 and steps > 0
    # Bad options fail as the server refuses them.
    for bad in ({"image_size": 5}, {"max_actions": 0}, {"protocol": "json"}, {"obs_format": "pixels"}):
        status, _ = http("POST", url + "/v1/sessions", {"seed": 1, **bad})
        assert status == 400
        try:
            Session(1, **bad)
            raise AssertionError(f"Session accepted {bad}")
        except ValueError:
            pass
    print(f"session parity: {len(CASES)} sessions, {steps} env steps, {invalid} invalid replies, all equal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
