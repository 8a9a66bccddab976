"""Prints, one per line, what pyproject.toml says the image's builder installs: the
build system's requirements (`build`) or the server's dependencies (`run`: the
package's own and its `server` extra's; the image runs the server). The Containerfile
installs them before it copies the source, so those layers are reused until
pyproject.toml changes. Run by the builder's Python: the standard library only."""

import sys
import tomllib

if __name__ == "__main__":
    with open(sys.argv[1], "rb") as f:
        project = tomllib.load(f)
    if sys.argv[2] == "build":
        lines = project["build-system"]["requires"]
    else:
        metadata = project["project"]
        lines = [*metadata["dependencies"], *metadata["optional-dependencies"]["server"]]
    print("\n".join(lines))
