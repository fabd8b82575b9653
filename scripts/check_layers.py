#!/usr/bin/env python3
"""Fails if a file includes a header, or a layer library links a library, from
a higher layer. The order is DESIGN.md's layer table: a layer may use the
layers listed before it, never those after. apps/ (the cli) may use them all.

Usage: scripts/check_layers.py [repo_root]
"""
import pathlib
import re
import sys

LAYERS = ["core", "profile", "kernels", "comm", "data", "io", "model", "optim",
          "parallel", "infer", "train", "rl", "plan"]
RANK = {name: i for i, name in enumerate(LAYERS)}
CLI_RANK = len(LAYERS)

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]anvil/([a-z_]+)/')
LINK = re.compile(r"target_link_libraries\(\s*(\S+)([^)]*)\)", re.S)


def layer_of(path, root):
    parts = path.relative_to(root).parts
    if parts[:2] == ("src", "anvil") and len(parts) > 3:
        if parts[2] not in RANK:
            return None, f"{path}: folder src/anvil/{parts[2]} is not a layer of DESIGN.md"
        return parts[2], None
    if parts[0] in ("apps", "tests", "bench"):
        return "cli", None
    return None, None


def rank(layer):
    return CLI_RANK if layer == "cli" else RANK[layer]


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    errors = []
    checked = 0
    paths = [p for top in ("src", "apps", "tests", "bench") for p in root.glob(f"{top}/**/*")]
    for path in sorted(paths):
        if not path.is_file():
            continue
        if path.suffix not in (".h", ".cc", ".txt") or (
                path.suffix == ".txt" and path.name != "CMakeLists.txt"):
            continue
        layer, problem = layer_of(path, root)
        if problem:
            errors.append(problem)
        if layer is None:
            continue
        text = path.read_text(errors="replace")
        checked += 1
        if path.suffix in (".h", ".cc"):
            for lineno, line in enumerate(text.splitlines(), 1):
                m = INCLUDE.match(line)
                if m and m.group(1) in RANK and rank(m.group(1)) > rank(layer):
                    errors.append(f"{path.relative_to(root)}:{lineno}: layer '{layer}' includes "
                                  f"'anvil/{m.group(1)}/', a higher layer")
        else:
            for m in LINK.finditer(text):
                for dep in re.findall(r"anvil_([a-z_]+)", m.group(2)):
                    if dep in RANK and rank(dep) > rank(layer):
                        errors.append(f"{path.relative_to(root)}: layer '{layer}' links "
                                      f"anvil_{dep}, a higher layer")
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        print(f"check_layers: {len(errors)} violation(s) of the layer order "
              f"({' < '.join(LAYERS)} < cli)", file=sys.stderr)
        return 1
    print(f"check_layers: {checked} files respect the layer order")
    return 0


if __name__ == "__main__":
    sys.exit(main())
