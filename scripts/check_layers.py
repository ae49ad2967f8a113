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
6. No import cycle between files, in src/ and crates/local/src/ (each file a node, an arrow
   wherever a path written in it resolves into another file; KNOWN_CYCLES lists those older
   than the rule, each frozen to its files), and the files of crates/local/src/backend/cpu/
   import from outside that folder only the backend's interface:
   backend::{Backend, BResult, AttnShape, DeltaShape, need} and LocalError (CONFINED).
Exit status: 0 when every rule holds, 1 otherwise.
"""

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
# Cycles known when the rule came in (issue 37), outside the folders it was written for; each
# must keep exactly these files (a new file in one, or a new cycle, fails) until it is fixed.
KNOWN_CYCLES = {
    frozenset(f"src/{f}" for f in files): why
    for files, why in [
        (["model/attempts.rs", "model/mod.rs"], "model's retry loop and the ChatModel trait"),
        (["agent/parse/balrog.rs", "agent/parse/lenient.rs", "agent/parse/mod.rs", "agent/parse/names.rs",
          "agent/parse/outcome.rs", "agent/parse/text.rs", "agent/parse/toolcall.rs"], "the parsers and their shared types in parse/mod.rs"),
        (["results/formats.rs", "results/frames.rs", "results/run.rs", "results/store.rs", "results/summary.rs"], "the run folder's readers and writers"),
        (["model/baseline.rs", "model/baseline/balrog.rs", "model/baseline/plan.rs"], "the scripted baselines"),
        (["model/openai.rs", "model/openai/errors.rs", "model/openai/wire.rs"], "the OpenAI client and its wire types"),
        (["report/html.rs", "report/html_episode.rs", "report/svg.rs"], "the HTML report's pages and charts"),
        (["view/live.rs", "view/mod.rs", "view/pages.rs", "view/routes.rs", "view/state.rs"], "the live view's server"),
        (["serve/mod.rs", "serve/routes.rs"], "serve-env's server and routes"),
        (["cli/baseline.rs", "cli/mod.rs"], "the baseline command and the CLI's dispatch"),
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


def check_folders(src: Path, label: str = "src") -> list[str]:
    """Rule 6 for the source folder `src`, whose files are named `label/…` in reports (src/ of
    the harness, crates/NAME/src of a workspace crate)."""
    problems = []
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
    for comp in find_cycles(graph):
        named = frozenset(f"{label}/{c}" for c in comp)
        if named in KNOWN_CYCLES:
            continue
        problems.append(
            f"import cycle between the files {' <-> '.join(f'{label}/{c}' for c in comp)}; move the shared piece into a leaf file"
        )
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
# The crates whose files rule 6 covers (crafter's textures/ and noise/ still hold cycles).
FILE_RULE_CRATES = {"local"}


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


def check_crates(crates: Path) -> list[str]:
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
        if files and name in FILE_RULE_CRATES:
            problems += check_folders(d / "src", f"crates/{name}/src")
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
    }
    crate_clean = {
        "local/Cargo.toml": "[dependencies]\ntokenizers = \"0.22\"\ncudarc = \"0.19\"\n",
        "local/src/lib.rs": "pub mod backend;\npub enum LocalError {}\n",
        "local/src/backend/mod.rs": "pub mod cpu;\npub trait Backend {}\npub struct AttnShape;\n",
        "local/src/backend/cpu/mod.rs": "mod leaf;\nmod user;\nuse super::{AttnShape, Backend};\nuse crate::LocalError;\n",
        "local/src/backend/cpu/leaf.rs": "pub fn x() {}\n",
        "local/src/backend/cpu/user.rs": "mod imp {\n    use super::super::leaf::x;\n}\nfn y() { super::leaf::x(); }\n",
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name, (tree, expected) in list(crate_cases.items()) + [("crates clean", (crate_clean, ""))]:
            root = Path(tmp) / name.replace(" ", "_") / "crates"
            for rel, text in tree.items():
                p = root / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(text, encoding="utf-8")
            found = check_crates(root)
            if name == "crates clean" and found:
                failures.append(f"clean crates reported: {found}")
            elif name != "crates clean" and not any(expected in f for f in found):
                failures.append(f"{name}: not reported (got {found})")
            else:
                print(f"self-test {name}: {next((f for f in found if expected in f), 'clean')}")
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
    problems = check(src) + check_folders(src) + check_crates(src.parent / "crates")
    for p in problems:
        print(f"layers: {p}", file=sys.stderr)
    if problems:
        print(f"layers: {len(problems)} problem(s); see docs/ARCHITECTURE.md", file=sys.stderr)
        return 1
    crates = src.parent / "crates"
    n_crates = len(rust_files(crates)) if crates.is_dir() else 0
    print(f"layers: ok ({len(rust_files(src))} files under {src}, {n_crates} under {crates})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
