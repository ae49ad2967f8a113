#!/usr/bin/env python3
"""Check the source tree's architecture (docs/ARCHITECTURE.md): layers, rooms and file sizes.

    python3 scripts/check_layers.py [SRC_DIR]      # default: src/ beside this script's parent
    python3 scripts/check_layers.py --self-test    # shows that each rule fails when broken

Rules, each failure naming the offending files:
1. Top-level modules of src/ import one another only along the allowed arrows
   (cli -> {eval, report, serve} -> {agent, model, results} -> crafter); any import cycle
   between top-level modules is reported as such.
2. src/ holds only main.rs, lib.rs and error.rs as files; everything else is a module folder.
3. Commands (clap argument types and `cmd_*` functions) live under src/cli/ only, and a
   command file never imports a sibling command (only cli::error, cli::common and cli::table).
4. No file has over 900 lines of non-test code (test modules and test-only files excluded;
   the pixel-art sprite table is exempt).
5. The workspace crates under crates/ depend on one another only along their arrows
   (python -> {parse, observe, crafter}, parse -> crafter, observe -> crafter,
   crafter -> nothing, local -> nothing), never on the
   harness package (vlm-eval), and pull in no HTTP, async runtime or model crate
   (tokio, reqwest, hyper, axum, async-openai, tokenizers, safetensors, cudarc, gemm), except
   the model crates the local model is made of (HEAVY_ALLOWED); the size rule holds for their
   files too.
6. No import cycle between files (each file a node, an arrow wherever a path written in it
   resolves into another file), under src/, under each workspace crate's crates/*/src/ and in
   the Python package python/vlmcrafter/ (`from .x import`, `from . import x`,
   `import vlmcrafter.x`, function-level imports included); KNOWN_CYCLES lists those older
   than the rule, each frozen to its files, and an entry whose cycle is gone must be removed.
   The files of crates/local/src/backend/cpu/ import from outside that folder only the
   backend's interface: backend::{Backend, BResult, AttnShape, DeltaShape, need} and
   LocalError (CONFINED).
Exit status: 0 when every rule holds, 1 otherwise.
"""

import ast
import re
import sys
import tempfile
from pathlib import Path

MAX_LINES = 900
# Files exempt from the size rule, relative to src/: data, not logic.
SIZE_EXEMPT = {"crates/crafter/src/textures/sprites.rs"}
ROOT_FILES = {"main.rs", "lib.rs", "error.rs"}
# Which top-level modules each may import (besides itself). Everything else is a violation.
ALLOWED = {
    "crafter": set(),
    "model": {"crafter"},
    "agent": {"crafter", "model"},
    "results": {"crafter"},
    "eval": {"agent", "model", "results", "crafter"},
    "report": {"results", "crafter"},
    "serve": {"agent", "model", "results", "crafter"},
    "view": {"report", "results", "crafter"},
    "cli": {"eval", "report", "serve", "view", "agent", "model", "results", "crafter"},
}
# Shared plumbing in src/cli/ that any command may import.
CLI_SHARED = {"error", "common", "table", "mod"}

CRATE_REF = re.compile(r"\bcrate::(\{[^}]*\}|[a-z_][a-z0-9_]*)")
COMMAND_MARKERS = [
    re.compile(r"#\[derive\([^)]*\b(Parser|Subcommand|Args)\b"),
    re.compile(r"^\s*pub(\([a-z]+\))?\s+fn\s+cmd_[a-z0-9_]+", re.M),
]


def strip_comments(text: str) -> str:
    """Remove // and /* */ comments (good enough for import scanning; strings are rare)."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def test_only_children(text: str) -> set[str]:
    """Names of `#[cfg(test)] mod NAME;` declarations (files holding only tests)."""
    return set(re.findall(r"#\[cfg\(test\)\]\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+([a-z0-9_]+)\s*;", text))


def non_test_lines(lines: list[str]) -> list[str]:
    """The lines outside `#[cfg(test)] mod … { … }` blocks."""
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip().startswith("#[cfg(test)]"):
            j = i + 1
            while j < len(lines) and lines[j].strip().startswith("#["):
                j += 1
            if j < len(lines) and re.match(r"\s*(pub(\([a-z]+\))?\s+)?mod\s+\w+\s*\{", lines[j]):
                depth = 0
                k = j
                while k < len(lines):
                    depth += lines[k].count("{") - lines[k].count("}")
                    if depth <= 0 and k >= j and "{" in "".join(lines[j : k + 1]):
                        break
                    k += 1
                i = k + 1
                continue
        out.append(line)
        i += 1
    return out


def rust_files(src: Path) -> list[Path]:
    return sorted(p for p in src.rglob("*.rs") if p.is_file())


def test_only_files(src: Path, files: list[Path]) -> set[Path]:
    result = set()
    for f in files:
        for name in test_only_children(f.read_text(encoding="utf-8")):
            base = f.parent if f.name in ("mod.rs", "lib.rs", "main.rs") else f.with_suffix("")
            for cand in (base / f"{name}.rs", base / name / "mod.rs"):
                if cand.exists():
                    result.add(cand)
                    if cand.name == "mod.rs":
                        result.update(cand.parent.rglob("*.rs"))
    return result


def top_module(src: Path, f: Path) -> str | None:
    rel = f.relative_to(src)
    if len(rel.parts) == 1:
        return None
    return rel.parts[0]


def imports_of(code: str) -> set[str]:
    mods = set()
    for m in CRATE_REF.finditer(code):
        ref = m.group(1)
        if ref.startswith("{"):
            for part in ref[1:-1].split(","):
                part = part.strip()
                if part:
                    mods.add(re.split(r"::|\s", part)[0])
        else:
            mods.add(ref)
    return mods


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def check(src: Path) -> list[str]:
    problems = []
    files = rust_files(src)
    tests_only = test_only_files(src, files)
    graph: dict[str, set[str]] = {}
    edges: dict[tuple[str, str], list[str]] = {}
    for f in files:
        rel = f.relative_to(src).as_posix()
        text = f.read_text(encoding="utf-8")
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        code_lines = lines if f in tests_only else non_test_lines(lines)
        code = strip_comments("\n".join(code_lines))
        top = top_module(src, f)

        # Rule 2: loose files at src/.
        if top is None and f.name not in ROOT_FILES:
            problems.append(f"src/{rel}: a loose file at src/ (only {', '.join(sorted(ROOT_FILES))}); move it into a module folder")

        # Rule 4: size.
        if f not in tests_only and rel not in SIZE_EXEMPT and len(code_lines) > MAX_LINES:
            problems.append(f"src/{rel}: {len(code_lines)} lines of non-test code (limit {MAX_LINES}); split it by concern")

        if f in tests_only:
            continue

        # Rule 3: commands only under src/cli/.
        if top != "cli" and f.name not in ("main.rs",):
            for marker in COMMAND_MARKERS:
                m = marker.search(code)
                if m:
                    problems.append(f"src/{rel}: command code ({m.group(0).strip()}) outside src/cli/; move it to src/cli/")
                    break
        if top == "cli":
            parts = f.relative_to(src / "cli").parts
            own = parts[0].removesuffix(".rs")
            for m in re.finditer(r"\b(?:crate::cli|super)::([a-z_][a-z0-9_]*)", code):
                sib = m.group(1)
                if own in CLI_SHARED or sib in CLI_SHARED or sib == own:
                    continue
                if (src / "cli" / f"{sib}.rs").exists() or (src / "cli" / sib).is_dir():
                    if len(parts) == 1 or m.group(0).startswith("crate::"):
                        problems.append(f"src/{rel}: the {own} command imports the sibling command cli::{sib}; move the shared part to cli/common.rs or the library")

        # Rule 1: imports between top-level modules.
        if top is None:
            continue
        for dep in imports_of(code):
            if dep == top or dep in ("self", "super"):
                continue
            graph.setdefault(top, set()).add(dep)
            edges.setdefault((top, dep), []).append(f"src/{rel}")
    for (a, b), where in sorted(edges.items()):
        allowed = ALLOWED.get(a)
        if allowed is None:
            problems.append(f"src/{a}: a top-level module not in the layer table of scripts/check_layers.py; add it there and to docs/ARCHITECTURE.md")
            continue
        if b not in allowed:
            problems.append(f"{a} -> {b} is not an allowed arrow (in {', '.join(sorted(set(where)))})")
    for comp in find_cycles(graph):
        files_in = sorted({w for (a, b), ws in edges.items() if a in comp and b in comp for w in ws})
        problems.append(f"import cycle between {' <-> '.join(comp)} (through {', '.join(files_in)})")
    return problems


# Rule 6: no import cycle between files, and the CPU backend's files import from above their
# folder only the backend's interface. Each file is a node; a path from `crate::`, `super::`,
# `self::` or one of the file's own child modules (through `use` groups and inline
# `mod x { … }` blocks) is an arrow to the file that defines its longest module prefix (a
# `pub use` re-export is an arrow to the file that holds it; `mod x;` declarations are not
# arrows). Test modules and test-only files are left out, as for the layers.
# Cycles known when the rule came in (issue 37; crates/ and python/ since issue 50), each as
# the files in it (paths from the repository root). Each must keep exactly these files (a new
# file in one, or a new cycle, fails) until it is fixed; then its entry must go (a stale entry
# fails too). Most are a folder's `mod.rs` (or `foo.rs` beside `foo/`) re-exporting its
# children while they import its types.
KNOWN_CYCLES = {
    frozenset(files): why
    for files, why in [
        (["src/model/attempts.rs", "src/model/mod.rs"], "model's retry loop and the ChatModel trait (mod.rs re-exports attempts.rs)"),
        (["src/model/baseline.rs", "src/model/baseline/balrog.rs", "src/model/baseline/plan.rs"], "the scripted baselines (baseline.rs and its children)"),
        (["src/model/openai.rs", "src/model/openai/errors.rs", "src/model/openai/wire.rs"], "the OpenAI client and its wire types (openai.rs and its children)"),
        (["src/serve/mod.rs", "src/serve/routes.rs"], "serve-env's server and routes (mod.rs's AppState)"),
        (["crates/crafter/src/textures/discover.rs", "crates/crafter/src/textures/fetch.rs", "crates/crafter/src/textures/machine.rs",
          "crates/crafter/src/textures/mod.rs", "crates/crafter/src/textures/sprites.rs"],
         "textures/mod.rs re-exports its children and they read its TextureSet, TextureError and constants (no cycle among the children)"),
        (["crates/crafter/src/noise/cases.rs", "crates/crafter/src/noise/mod.rs", "crates/crafter/src/noise/x8.rs"],
         "noise/mod.rs's constants and OpenSimplex read by its SIMD kernel x8.rs and its case table"),
    ]
}
# Files under these folders (named from the repository root) may import from outside their
# folder only the names listed (absolute module paths of their crate, without the leading
# `crate`).
CONFINED = {
    "crates/local/src/backend/cpu": {
        ("backend", "Backend"),
        ("backend", "BResult"),
        ("backend", "AttnShape"),
        ("backend", "DeltaShape"),
        ("backend", "need"),
        ("LocalError",),
    },
}
USE_STMT = re.compile(r"\b(?:pub(?:\([^)]*\))?\s+)?use\s+([^;]+);")
PATH_START = re.compile(r"(?<![\w:])(\$crate|crate|super|self)((?:\s*::\s*[A-Za-z_]\w*)+)")
INLINE_MOD = re.compile(r"\bmod\s+(\$?[A-Za-z_]\w*)\s*\{")
CHILD_DECL = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+([a-z_][a-z0-9_]*)\s*;", re.M)


def module_of(src: Path, f: Path) -> tuple[str, ...]:
    rel = f.relative_to(src).with_suffix("").parts
    return rel[:-1] if rel[-1] in ("mod", "lib", "main") else rel


def expand_use(tree: str) -> list[str]:
    """`a::{b, c::{self, d}}` -> ["a::b", "a::c", "a::c::d"] (aliases dropped)."""
    tree = " ".join(tree.split())
    i = tree.find("{")
    if i < 0:
        return [re.split(r"\s+as\s+", tree)[0].strip()]
    prefix = tree[:i].strip().removesuffix("::").strip()
    inner = tree[i + 1 : tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        depth += (ch == "{") - (ch == "}")
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    out = []
    for part in parts:
        if not part.strip():
            continue
        for sub in expand_use(part):
            out.append(prefix if sub == "self" else (f"{prefix}::{sub}" if prefix else sub))
    return out


def inline_mods(code: str) -> list[tuple[int, int, str]]:
    """(start, end, name) of each inline `mod name { … }` block."""
    out = []
    for m in INLINE_MOD.finditer(code):
        depth, k = 0, m.end() - 1
        while k < len(code):
            depth += (code[k] == "{") - (code[k] == "}")
            if depth == 0:
                break
            k += 1
        out.append((m.start(), k, m.group(1)))
    return out


def resolve(path: str, here: tuple[str, ...], children: set[str]) -> tuple[str, ...] | None:
    """An absolute module path (without `crate`) for a path written in module `here`."""
    segs = [s.strip() for s in path.split("::") if s.strip()]
    if not segs:
        return None
    head, rest = segs[0], segs[1:]
    if head in ("crate", "$crate"):
        base = ()
    elif head == "self":
        base = here
    elif head == "super":
        base = here[:-1]
        while rest and rest[0] == "super":
            base, rest = base[:-1], rest[1:]
    elif head in children:
        base, rest = here + (head,), rest
    else:
        return None
    return tuple(base) + tuple(rest)


def file_imports(src: Path, f: Path, code: str) -> list[tuple[str, ...]]:
    """Absolute module paths that the (test-free, comment-free) code of file f refers to."""
    own = module_of(src, f)
    children = set(CHILD_DECL.findall(code))
    blocks = inline_mods(code)

    def here_at(pos: int) -> tuple[str, ...]:
        return own + tuple(name for a, b, name in blocks if a < pos < b)

    found = []
    for m in USE_STMT.finditer(code):
        for p in expand_use(m.group(1)):
            r = resolve(p, here_at(m.start()), children)
            if r is not None:
                found.append(r)
    rest = USE_STMT.sub(lambda m: " " * len(m.group(0)), code)
    for m in PATH_START.finditer(rest):
        r = resolve(m.group(1) + m.group(2), here_at(m.start()), children)
        if r is not None:
            found.append(r)
    for name in children:
        for m in re.finditer(rf"(?<![\w:]){name}\s*::", rest):
            found.append(own + (name,))
    return found


def file_of(src: Path, path: tuple[str, ...]) -> Path | None:
    """The file that defines the longest module prefix of `path`."""
    for k in range(len(path), -1, -1):
        base = src.joinpath(*path[:k]) if k else src
        for cand in ((base / "mod.rs",) if k else (src / "lib.rs",)) + ((base.with_suffix(".rs"),) if k else ()):
            if cand.is_file():
                return cand
    return None


def file_graph(src: Path) -> tuple[dict[str, set[str]], dict[Path, list[tuple[str, ...]]]]:
    """Each Rust file under src (by path relative to it) -> the files its paths resolve into."""
    files = rust_files(src)
    tests_only = test_only_files(src, files)
    imports: dict[Path, list[tuple[str, ...]]] = {}
    for f in files:
        if f in tests_only:
            continue
        lines = f.read_text(encoding="utf-8").split("\n")
        imports[f] = file_imports(src, f, strip_comments("\n".join(non_test_lines(lines))))
    graph: dict[str, set[str]] = {}
    for f, refs in imports.items():
        a = f.relative_to(src).as_posix()
        for r in refs:
            g = file_of(src, r)
            if g is None or g == f or g.name in ("lib.rs", "main.rs"):
                continue
            graph.setdefault(a, set()).add(g.relative_to(src).as_posix())
    return graph, imports


def cycle_problems(graph: dict[str, set[str]], label: str, seen: set[frozenset] | None = None) -> list[str]:
    """Cycles of a file graph not in KNOWN_CYCLES, files named `label/<file>`; the known ones
    found are added to `seen`."""
    problems = []
    for comp in find_cycles(graph):
        named = frozenset(f"{label}/{c}" for c in comp)
        if named in KNOWN_CYCLES:
            if seen is not None:
                seen.add(named)
            # A known cycle through a folder's door (its mod.rs, or foo.rs beside foo/) still
            # may not hide a cycle among the files behind the door.
            doors = {c for c in comp if c.endswith("/mod.rs") or any(o.startswith(c.removesuffix(".rs") + "/") for o in comp)}
            inner = {a: {b for b in graph.get(a, ()) if b in comp and b not in doors} for a in comp if a not in doors}
            for sub in find_cycles(inner) if doors else []:
                problems.append(
                    f"import cycle between the files {' <-> '.join(f'{label}/{c}' for c in sub)} (inside the known cycle through {', '.join(sorted(f'{label}/{d}' for d in doors))}); give each side what it needs on its own"
                )
            continue
        problems.append(
            f"import cycle between the files {' <-> '.join(sorted(named))}; give each side what it needs on its own (a type where it belongs, an argument instead of a call back), not a shared grab-bag file"
        )
    return problems


def check_folders(src: Path, label: str = "src", seen: set[frozenset] | None = None) -> list[str]:
    """Rule 6 for the Rust files under `src`, named `label/<file>` (src/ of the harness,
    crates/NAME/src of a workspace crate), and CONFINED for the folders under it."""
    graph, imports = file_graph(src)
    problems = cycle_problems(graph, label, seen)
    for key, allowed in CONFINED.items():
        if not key.startswith(label + "/"):
            continue
        folder = key.removeprefix(label + "/")
        prefix = tuple(folder.split("/"))
        for f, refs in imports.items():
            rel = f.relative_to(src)
            if rel.parts[: len(prefix)] != prefix:
                continue
            for r in sorted(set(refs)):
                if r[: len(prefix)] == prefix or r in allowed:
                    continue
                problems.append(
                    f"{label}/{rel.as_posix()}: imports crate::{'::'.join(r)} from above {key}/, which may take only {', '.join(sorted('::'.join(a[-2:]) for a in allowed))}"
                )
    return problems


# Rule 5: the workspace crates (directory under crates/) and the workspace crates each may use.
CRATE_ALLOWED = {
    "crafter": set(),
    "observe": {"crafter"},
    "parse": {"crafter"},
    "python": {"crafter", "observe", "parse"},
    "local": set(),
}
# Workspace crate name (Cargo package) -> directory under crates/; the harness package is "vlm-eval".
CRATE_PACKAGES = {
    "vlm-eval-crafter": "crafter",
    "vlm-eval-observe": "observe",
    "vlm-eval-parse": "parse",
    "vlm-eval-python": "python",
    "vlm-eval-local": "local",
    "vlm-eval": "harness",
}
HEAVY_DEPS = {"tokio", "reqwest", "hyper", "hyper-util", "axum", "async-openai", "tokenizers", "safetensors", "cudarc", "gemm"}
# The heavy crates a workspace crate is made of: the local model's tokenizer, checkpoint
# reader, CPU matrix products and CUDA bindings (never HTTP or an async runtime).
HEAVY_ALLOWED = {"local": {"tokenizers", "safetensors", "cudarc", "gemm"}}


def manifest_deps(manifest: Path) -> set[str]:
    """Package names under the [*dependencies] tables of a Cargo.toml (dev and build excluded)."""
    deps, table = set(), None
    for line in manifest.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line.startswith("["):
            table = line.strip("[]").strip()
            continue
        if table == "dependencies" or (table or "").startswith("target.") and table.endswith(".dependencies"):
            m = re.match(r"([A-Za-z0-9_-]+)\s*=", line)
            if m:
                deps.add(m.group(1))
        elif table and table.startswith("dependencies."):
            deps.add(table.split(".", 1)[1])
    return deps


def check_crates(crates: Path, seen: set[frozenset] | None = None) -> list[str]:
    problems = []
    if not crates.is_dir():
        return problems
    for d in sorted(p for p in crates.iterdir() if p.is_dir()):
        manifest = d / "Cargo.toml"
        if not manifest.exists():
            continue
        name = d.name
        allowed = CRATE_ALLOWED.get(name)
        if allowed is None:
            problems.append(f"crates/{name}: a crate not in CRATE_ALLOWED of scripts/check_layers.py; add it there and to docs/ARCHITECTURE.md")
            continue
        deps = manifest_deps(manifest)
        for dep in sorted(deps):
            if dep in CRATE_PACKAGES and CRATE_PACKAGES[dep] not in allowed:
                problems.append(f"crates/{name}/Cargo.toml: depends on {dep}, not an allowed arrow for crates/{name}")
            if dep in HEAVY_DEPS and dep not in HEAVY_ALLOWED.get(name, set()):
                problems.append(f"crates/{name}/Cargo.toml: depends on {dep} (HTTP, async or model code); the engine side stays free of it")
        files = rust_files(d / "src") if (d / "src").is_dir() else []
        if files:
            problems += check_folders(d / "src", f"{crates.name}/{name}/src", seen)
        tests_only = test_only_files(d / "src", files)
        for f in files:
            rel = f"crates/{name}/{f.relative_to(d).as_posix()}"
            lines = f.read_text(encoding="utf-8").split("\n")
            if f in tests_only:
                continue
            code_lines = non_test_lines(lines)
            if rel not in SIZE_EXEMPT and len(code_lines) > MAX_LINES + 1:
                problems.append(f"{rel}: {len(code_lines)} lines of non-test code (limit {MAX_LINES}); split it by concern")
            code = strip_comments("\n".join(code_lines))
            for m in re.finditer(r"\b(vlm_eval(?:_[a-z]+)?)::", code):
                used = m.group(1)
                target = "harness" if used == "vlm_eval" else used.removeprefix("vlm_eval_")
                if target != name and target not in allowed:
                    problems.append(f"{rel}: uses {used}, not an allowed arrow for crates/{name}")
                    break
    return problems


def python_imports(pkg: Path, f: Path) -> set[Path]:
    """The files of package folder `pkg` that Python file f imports (`from .x import y`,
    `from . import x`, `from ..x import y`, `import pkg.x`, `from pkg.x import y`; at any depth,
    inside functions too). An import of the package itself (its root `__init__.py`) is no
    arrow, as `lib.rs` is none; a name that is no file (an extension module) is none either."""
    here = f.parent.relative_to(pkg).parts if f.parent != pkg else ()
    out: set[Path] = set()

    def target(parts: tuple[str, ...], names: list[str]) -> None:
        base = pkg.joinpath(*parts)
        for name in names or [None]:
            for cand in ((base / name).with_suffix(".py"), base / name / "__init__.py") if name else ():
                if cand.is_file():
                    out.add(cand)
                    break
            else:
                for cand in (base.with_suffix(".py"), base / "__init__.py"):
                    if cand.is_file() and cand != pkg / "__init__.py":
                        out.add(cand)
                        break

    tree = ast.parse(f.read_text(encoding="utf-8"), filename=str(f))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names = [a.name for a in node.names if a.name != "*"]
            if node.level:
                up = node.level - 1
                if up > len(here):
                    continue
                parts = here[: len(here) - up] + tuple((node.module or "").split(".") if node.module else ())
            elif node.module and node.module.split(".")[0] == pkg.name:
                parts = tuple(node.module.split(".")[1:])
            else:
                continue
            target(parts, names)
        elif isinstance(node, ast.Import):
            for a in node.names:
                segs = a.name.split(".")
                if segs[0] == pkg.name and len(segs) > 1:
                    target(tuple(segs[1:-1]), [segs[-1]])
    out.discard(f)
    return out


def check_python(pkg: Path, label: str, seen: set[frozenset] | None = None) -> list[str]:
    """Rule 6 for the Python package folder `pkg`, its files named `label/<file>`."""
    if not pkg.is_dir():
        return []
    graph: dict[str, set[str]] = {}
    problems = []
    for f in sorted(pkg.rglob("*.py")):
        try:
            deps = python_imports(pkg, f)
        except SyntaxError as e:
            problems.append(f"{label}/{f.relative_to(pkg).as_posix()}: not valid Python ({e.msg}, line {e.lineno})")
            continue
        graph[f.relative_to(pkg).as_posix()] = {g.relative_to(pkg).as_posix() for g in deps}
    return problems + cycle_problems(graph, label, seen)


def stale_known(seen: set[frozenset]) -> list[str]:
    """KNOWN_CYCLES entries whose cycle is gone."""
    return [
        f"KNOWN_CYCLES in scripts/check_layers.py lists {', '.join(sorted(k))}, which no longer import one another in a cycle; remove the entry"
        for k in sorted(KNOWN_CYCLES, key=sorted)
        if k not in seen
    ]


def self_test() -> int:
    """Break each rule in a scratch tree and check that it is reported."""
    # name -> (tree, a phrase the report must contain)
    cases = {
        "cycle": ({
            "crafter/mod.rs": "use crate::eval::x;\n",
            "eval/mod.rs": "use crate::crafter::y;\n",
        }, "import cycle between crafter <-> eval"),
        "upward arrow": ({"report/mod.rs": "use crate::eval::store;\n", "eval/mod.rs": ""}, "report -> eval"),
        "grouped import": ({"results/mod.rs": "use crate::{crafter::A, report::B};\n"}, "results -> report"),
        "loose file": ({"runcmd.rs": "pub fn x() {}\n"}, "src/runcmd.rs: a loose file"),
        "command outside cli": ({"eval/x.rs": "#[derive(Args, Debug)]\npub struct A;\n"}, "src/eval/x.rs: command code"),
        "command function": ({"serve/mod.rs": "pub fn cmd_serve_env() {}\n"}, "src/serve/mod.rs: command code"),
        "sibling command": ({"cli/run.rs": "use crate::cli::check::x;\n", "cli/check.rs": ""}, "imports the sibling command cli::check"),
        "long file": ({"agent/parse.rs": "fn a() {}\n" * (MAX_LINES + 1)}, f"{MAX_LINES + 1} lines of non-test code"),
        "file cycle": ({
            "model/openai/mod.rs": "mod a;\nmod b;\n",
            "model/openai/a.rs": "use super::b::x;\n",
            "model/openai/b.rs": "pub fn x() {}\nfn y() { super::a::z(); }\n",
        }, "import cycle between the files src/model/openai/a.rs <-> src/model/openai/b.rs"),
        "cycle through an inline module": ({
            "model/openai/mod.rs": "mod a;\nmod b;\n",
            "model/openai/a.rs": "mod imp {\n    use super::super::b::{self, x};\n}\n",
            "model/openai/b.rs": "use super::{a::y, c};\n",
        }, "import cycle between the files src/model/openai/a.rs <-> src/model/openai/b.rs"),
        "cycle through mod.rs": ({
            "cli/run/mod.rs": "mod steps;\npub struct Args;\npub fn cmd_run() { steps::go(); }\n",
            "cli/run/steps.rs": "use super::Args;\n",
        }, "import cycle between the files src/cli/run/mod.rs <-> src/cli/run/steps.rs"),
    }
    clean = {
        "crafter/mod.rs": "",
        "agent/parse.rs": "fn a() {}\n" * MAX_LINES + "#[cfg(test)]\nmod tests {\n" + "fn t() {}\n" * 500 + "}\n",
        "cli/run.rs": "use crate::cli::common::x;\nuse crate::eval::y;\n",
        "cli/common.rs": "",
        "eval/mod.rs": "use crate::{agent::a, crafter::b};\n",
        "agent/mod.rs": "#[cfg(test)]\nmod tests;\n",
        "agent/tests.rs": "use crate::eval::z;\n" + "fn t() {}\n" * 1000,
        "model/openai/mod.rs": "mod leaf;\nmod user;\n",
        "model/openai/leaf.rs": "pub fn x() {}\n",
        "model/openai/user.rs": "mod imp {\n    use super::super::leaf::x;\n}\nfn y() { super::leaf::x(); }\n",
    }
    failures = []
    crate_cases = {
        "engine uses harness": ({"crafter/Cargo.toml": "[dependencies]\nserde = \"1\"\n", "crafter/src/lib.rs": "use vlm_eval::agent::x;\n"}, "uses vlm_eval, not an allowed arrow"),
        "engine depends up": ({"crafter/Cargo.toml": "[dependencies]\nvlm-eval-observe = { path = \"../observe\" }\n"}, "depends on vlm-eval-observe"),
        "python pulls tokio": ({"python/Cargo.toml": "[dependencies]\ntokio = \"1\"\n"}, "depends on tokio"),
        "parser uses observe": ({"parse/Cargo.toml": "[dependencies]\nvlm-eval-observe = { path = \"../observe\" }\n"}, "depends on vlm-eval-observe"),
        "file cycle in a crate": ({
            "crafter/Cargo.toml": "[dependencies]\n",
            "crafter/src/lib.rs": "mod textures;\n",
            "crafter/src/textures/mod.rs": "mod discover;\nmod fetch;\npub struct TextureSet;\n",
            "crafter/src/textures/discover.rs": "use super::fetch::fetch_official;\n",
            "crafter/src/textures/fetch.rs": "pub fn fetch_official() { super::discover::cache_dir(); }\n",
        }, "import cycle between the files crates/crafter/src/textures/discover.rs <-> crates/crafter/src/textures/fetch.rs"),
        "cycle behind a known door": ({
            "crafter/Cargo.toml": "[dependencies]\n",
            "crafter/src/lib.rs": "mod textures;\n",
            "crafter/src/textures/mod.rs": "mod discover;\nmod fetch;\nmod machine;\nmod sprites;\npub use discover::A;\npub use fetch::B;\npub use machine::C;\npub use sprites::D;\npub struct T;\n",
            "crafter/src/textures/discover.rs": "use super::fetch::B;\nuse super::T;\n",
            "crafter/src/textures/fetch.rs": "use super::discover::A;\nuse super::T;\n",
            "crafter/src/textures/machine.rs": "use super::T;\n",
            "crafter/src/textures/sprites.rs": "use super::T;\n",
        }, "import cycle between the files crates/crafter/src/textures/discover.rs <-> crates/crafter/src/textures/fetch.rs (inside the known cycle"),
        "local uses harness": ({"local/Cargo.toml": "[dependencies]\nvlm-eval = { path = \"../..\" }\n"}, "depends on vlm-eval, not an allowed arrow"),
        "local pulls tokio": ({"local/Cargo.toml": "[dependencies]\ntokenizers = \"0.22\"\ntokio = \"1\"\n"}, "crates/local/Cargo.toml: depends on tokio"),
        "local file cycle": ({
            "local/Cargo.toml": "[dependencies]\n",
            "local/src/lib.rs": "pub mod device;\npub mod backend;\n",
            "local/src/device.rs": "use crate::backend::cuda::Cuda;\n",
            "local/src/backend/mod.rs": "pub mod cuda;\n",
            "local/src/backend/cuda/mod.rs": "use crate::device::DType;\npub struct Cuda;\n",
        }, "import cycle between the files crates/local/src/backend/cuda/mod.rs <-> crates/local/src/device.rs"),
        "cpu imports upward": ({
            "local/Cargo.toml": "[dependencies]\n",
            "local/src/backend/cpu/mod.rs": "mod a;\n",
            "local/src/backend/cpu/a.rs": "use crate::engine::Engine;\n",
            "local/src/engine.rs": "",
        }, "imports crate::engine::Engine from above crates/local/src/backend/cpu/"),
        "clean local crate": ({
            "local/Cargo.toml": "[dependencies]\ntokenizers = \"0.22\"\ncudarc = \"0.19\"\n",
            "local/src/lib.rs": "pub mod backend;\npub enum LocalError {}\n",
            "local/src/backend/mod.rs": "pub mod cpu;\npub trait Backend {}\npub struct AttnShape;\n",
            "local/src/backend/cpu/mod.rs": "mod leaf;\nmod user;\nuse super::{AttnShape, Backend};\nuse crate::LocalError;\n",
            "local/src/backend/cpu/leaf.rs": "pub fn x() {}\n",
            "local/src/backend/cpu/user.rs": "mod imp {\n    use super::super::leaf::x;\n}\nfn y() { super::leaf::x(); }\n",
        }, ""),
        "clean crate": ({
            "crafter/Cargo.toml": "[dependencies]\n",
            "crafter/src/lib.rs": "mod textures;\nuse textures::TextureSet;\n",
            "crafter/src/textures/mod.rs": "mod discover;\nmod fetch;\nmod set;\npub use set::TextureSet;\n",
            "crafter/src/textures/set.rs": "pub struct TextureSet;\n",
            "crafter/src/textures/discover.rs": "use super::fetch::fetch_official;\nuse super::set::TextureSet;\n",
            "crafter/src/textures/fetch.rs": "use super::set::TextureSet;\npub fn fetch_official() {}\n",
        }, ""),
    }
    py_cases = {
        "python cycle (relative)": ({
            "__init__.py": "from . import a\n",
            "a.py": "from .b import helper\n",
            "b.py": "from . import a\n",
        }, "import cycle between the files python/vlmcrafter/a.py <-> python/vlmcrafter/b.py"),
        "python cycle (absolute, in a function)": ({
            "a.py": "import vlmcrafter.b\n",
            "b.py": "def f():\n    from vlmcrafter.c import g\n",
            "c.py": "def g():\n    import vlmcrafter.a as a\n",
        }, "import cycle between the files python/vlmcrafter/a.py <-> python/vlmcrafter/b.py <-> python/vlmcrafter/c.py"),
        "python clean": ({
            "__init__.py": "from . import _native\nfrom . import a\nfrom .b import g\n",
            "a.py": "from . import _native\nfrom .b import g\nimport numpy\n",
            "b.py": "from . import _native\nimport vlmcrafter\ndef g():\n    pass\n",
        }, ""),
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name, (tree, expected) in crate_cases.items():
            root = Path(tmp) / name.replace(" ", "_") / "crates"
            for rel, text in tree.items():
                p = root / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(text, encoding="utf-8")
            found = check_crates(root)
            if not expected and found:
                failures.append(f"{name}: reported {found}")
            elif expected and not any(expected in f for f in found):
                failures.append(f"{name}: not reported (got {found})")
            else:
                print(f"self-test {name}: {next(f for f in found if expected in f) if expected else 'clean'}")
        for name, (tree, expected) in py_cases.items():
            pkg = Path(tmp) / name.replace(" ", "_") / "python" / "vlmcrafter"
            for rel, text in tree.items():
                p = pkg / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(text, encoding="utf-8")
            found = check_python(pkg, "python/vlmcrafter")
            if not expected and found:
                failures.append(f"{name}: reported {found}")
            elif expected and not any(expected in f for f in found):
                failures.append(f"{name}: not reported (got {found})")
            else:
                print(f"self-test {name}: {next(f for f in found if expected in f) if expected else 'clean'}")
        stale = stale_known(set(KNOWN_CYCLES) - {next(iter(sorted(KNOWN_CYCLES, key=sorted)))})
        if len(stale) != 1 or "no longer import one another" not in stale[0]:
            failures.append(f"stale KNOWN_CYCLES entry: not reported (got {stale})")
        else:
            print(f"self-test stale known cycle: {stale[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (tree, expected) in list(cases.items()) + [("clean", (clean, ""))]:
            root = Path(tmp) / name.replace(" ", "_") / "src"
            for rel, text in tree.items():
                p = root / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(text, encoding="utf-8")
            found = check(root) + check_folders(root)
            if name == "clean" and found:
                failures.append(f"clean tree reported: {found}")
            elif name != "clean" and not any(expected in f for f in found):
                failures.append(f"{name}: not reported (got {found})")
            else:
                hit = next((f for f in found if expected in f), "clean")
                print(f"self-test {name}: {hit}")
    for f in failures:
        print(f"self-test FAILED: {f}", file=sys.stderr)
    return 1 if failures else 0


def main() -> int:
    args = sys.argv[1:]
    if args == ["--self-test"]:
        return self_test()
    src = Path(args[0]) if args else Path(__file__).resolve().parent.parent / "src"
    root = src.parent
    seen: set[frozenset] = set()
    problems = check(src) + check_folders(src, "src", seen) + check_crates(root / "crates", seen)
    problems += check_python(root / "python" / "vlmcrafter", "python/vlmcrafter", seen)
    if not args:
        problems += stale_known(seen)
    for p in problems:
        print(f"layers: {p}", file=sys.stderr)
    if problems:
        print(f"layers: {len(problems)} problem(s); see docs/ARCHITECTURE.md", file=sys.stderr)
        return 1
    crates = src.parent / "crates"
    n_crates = len(rust_files(crates)) if crates.is_dir() else 0
    n_py = len(list((root / "python" / "vlmcrafter").rglob("*.py")))
    print(f"layers: ok ({len(rust_files(src))} files under {src}, {n_crates} under {crates}, {n_py} Python files under python/vlmcrafter)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
