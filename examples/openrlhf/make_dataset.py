"""Write an OpenRLHF prompt dataset for Crafter: one JSONL row per seed, label = seed.

    python examples/openrlhf/make_dataset.py --url http://127.0.0.1:8000 --seeds 0-255 --out data/crafter

Each row's prompt is the evaluator's system prompt plus the seed's first observation text and
frame (saved as DIR/frames/seed_<seed>.png and listed in "images"); the frame and text come
from the server, so they are exactly what `crafter_agent.py`'s session for that seed starts
from. Standard library only.
"""

import argparse
import base64
import json
import sys
import urllib.request
from pathlib import Path


def call(url: str, method: str, path: str, token: str, body=None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url.rstrip("/") + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def seeds_of(spec: str) -> list:
    out = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi) + 1) if hi else [int(lo)])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--token", default="")
    ap.add_argument("--seeds", default="0-99", help="e.g. 0-99 or 1,5,9-12")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--image-size", type=int, default=None)
    ap.add_argument("--obs-format", default=None, choices=["state", "balrog"])
    args = ap.parse_args()

    info = call(args.url, "GET", "/v1/info", args.token)
    frames = args.out / "frames"
    frames.mkdir(parents=True, exist_ok=True)
    rows = args.out / "train.jsonl"
    with rows.open("w") as f:
        for seed in seeds_of(args.seeds):
            body = {"seed": seed}
            if args.image_size:
                body["image_size"] = args.image_size
            if args.obs_format:
                body["obs_format"] = args.obs_format
            s = call(args.url, "POST", "/v1/sessions", args.token, body)
            call(args.url, "DELETE", f"/v1/sessions/{s['id']}", args.token)
            png = frames / f"seed_{seed}.png"
            png.write_bytes(base64.b64decode(s["frame_png_b64"]))
            row = {
                "prompt": [
                    {"role": "system", "content": info["system_prompt"]},
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": s["observation"]},
                            {"type": "image"},
                        ],
                    },
                ],
                "images": [str(png.resolve())],
                "label": str(seed),
            }
            f.write(json.dumps(row) + "\n")
    print(f"wrote {rows} ({len(seeds_of(args.seeds))} rows)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
