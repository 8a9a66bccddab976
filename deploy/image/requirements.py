"""Prints, one per line, what pyproject.toml says the image's builder installs: the
build system's requirements (`build`) or the package's dependencies (`run`). The
Containerfile installs them before it copies the source, so those layers are reused
until pyproject.toml changes. Run by the builder's Python: the standard library only."""

import sys
import tomllib

KEYS = {"build": ("build-system", "requires"), "run": ("project", "dependencies")}

if __name__ == "__main__":
    table, key = KEYS[sys.argv[2]]
    with open(sys.argv[1], "rb") as f:
        print("\n".join(tomllib.load(f)[table][key]))
