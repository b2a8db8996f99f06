"""What a new user meets first: the builds, the backend guide, the README's two commands, the docs' links and words.

Each test does what the user would: builds the wheels and reads pip's output,
follows docs/writing-a-backend.md (builds its example project, installs it and
runs its conformance script on one and on three real processes), and runs
tools/run-tox with a Python that is marked externally managed (PEP 668).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path
from typing import Dict, List

import pytest

ROOT = Path(__file__).resolve().parents[3]
GUIDE = ROOT / "docs" / "writing-a-backend.md"
README = ROOT / "README.md"
PYPROJECTS = [ROOT / "core" / "pyproject.toml"] + sorted((ROOT / "plugins").glob("*/pyproject.toml"))


def _clean_env(**extra: str) -> Dict[str, str]:
    """This process's environment without mmeval, tox or virtualenv settings, plus ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MMEVAL_", "TOX_", "PYTHONPATH")) and k != "VIRTUAL_ENV"
    }
    env.update(extra)
    return env


def _pip(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", *args], cwd=cwd, capture_output=True, text=True, timeout=600, env=_clean_env()
    )


# -- packaging (item 12) -------------------------------------------------------


@pytest.mark.parametrize("pyproject", PYPROJECTS, ids=lambda p: p.parent.name)
def test_pyproject_has_spdx_license_and_an_existing_readme(pyproject: Path) -> None:
    text = pyproject.read_text()
    assert re.search(r'^license\s*=\s*"[A-Za-z0-9.+-]+( (AND|OR|WITH) [A-Za-z0-9.+-]+)*"\s*$', text, re.M), (
        f'{pyproject}: project.license must be an SPDX string (license = "Apache-2.0"); the table form is deprecated'
    )
    assert re.search(r'"(setuptools>=(7[7-9]|[89]\d|\d{3,})|flit_core>=3\.(1[2-9]|[2-9]\d))', text), (
        f"{pyproject}: the SPDX license string needs setuptools>=77 or flit_core>=3.12 in [build-system] requires"
    )
    readme = re.search(r'^readme\s*=\s*"([^"]+)"', text, re.M)
    assert readme, f"{pyproject}: no readme: the distribution would ship without a description"
    assert (pyproject.parent / readme.group(1)).is_file(), f"{pyproject}: readme {readme.group(1)!r} does not exist"


def test_core_wheel_builds_without_warnings(tmp_path: Path) -> None:
    src = tmp_path / "core"
    shutil.copytree(ROOT / "core", src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    proc = _pip("wheel", "--no-deps", "-v", str(src), "-w", str(tmp_path / "wheels"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    warnings = [ln.strip() for ln in out.splitlines() if re.search(r"\w+Warning\b|cannot be found|is deprecated", ln)]
    assert not warnings, "building mmeval-core warns:\n" + "\n".join(warnings)
    (wheel,) = glob.glob(str(tmp_path / "wheels" / "mmeval_core-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        meta = zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in meta
    assert "# mmeval-core" in meta, "the wheel has no long description (core/README.md)"


# -- the backend guide (item 11) --------------------------------------------------


def _guide_blocks() -> List[tuple[str, str]]:
    return re.findall(r"```(\w+)\n(.*?)```", GUIDE.read_text(), re.S)


def _guide_project() -> Dict[str, str]:
    """The example project the guide shows: file name -> content, as a reader copies them."""
    blocks = _guide_blocks()
    toml = [b for lang, b in blocks if lang == "toml" and "[project]" in b]
    module = [b for lang, b in blocks if lang == "python" and "(BaseDistBackend)" in b and "..." not in b]
    script = [b for lang, b in blocks if lang == "python" and "check_backend(get_dist_backend(" in b]
    assert len(toml) == 1 and len(module) == 1 and script, (
        "docs/writing-a-backend.md must show one complete example: a pyproject.toml, a backend module without "
        "'...' stubs, and a conformance script"
    )
    entry = re.search(r'^(\w+) = "(\w+):(\w+)"', toml[0], re.M)
    assert entry, "the example pyproject has no entry point 'name = module:Class'"
    name, mod, cls = entry.groups()
    assert f"class {cls}(" in module[0] and f'name = "{name}"' in module[0]
    conf = next(s for s in script if f'get_dist_backend("{name}")' in s)
    conf_name = re.findall(r"`(conformance_\w+\.py)`", GUIDE.read_text())[0]
    return {"pyproject.toml": toml[0], f"{mod}.py": module[0], conf_name: conf, "_name": name, "_module": mod}


def test_guide_says_to_install_the_core_first_and_states_the_requirements() -> None:
    text = GUIDE.read_text()
    assert "pip install ./core" in text, "the guide must say to install mmeval-core from the checkout first"
    for needed in ("no arguments", "world size 1", "not initialized", "names the failing rank"):
        assert needed in text.lower(), f"the guide does not say {needed!r}"


def test_guide_example_backend_builds_installs_and_conforms(tmp_path: Path) -> None:
    project = _guide_project()
    name, module = project.pop("_name"), project.pop("_module")
    proj = tmp_path / f"mmeval-{name}"
    proj.mkdir()
    for fname, content in project.items():
        (proj / fname).write_text(content)
    conf = next(f for f in project if f.startswith("conformance_"))

    # the conformance script beside the module must not break the build (flat-layout discovery)
    proc = _pip("wheel", "--no-deps", str(proj), "-w", str(tmp_path / "wheels"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (wheel,) = glob.glob(str(tmp_path / "wheels" / "*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        eps = zf.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert f"{module}.py" in names and conf not in names, names
    assert "[mmeval.dist_backends]" in eps and f"{name} = " in eps

    site = tmp_path / "site"
    proc = _pip("install", "--no-deps", "--target", str(site), wheel, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]

    # world size 1, nothing initialized: `python conformance_x.py`
    env = _clean_env(PYTHONPATH=str(site))
    one = subprocess.run([sys.executable, conf], cwd=proj, env=env, capture_output=True, text=True, timeout=300)
    assert one.returncode == 0, one.stderr[-3000:]
    assert "accuracy_end_to_end" in one.stdout

    # three ranks, as the guide's shell loop starts them
    upper = name.upper()
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, conf],
            cwd=proj,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_clean_env(
                PYTHONPATH=str(site),
                **{
                    f"MMEVAL_{upper}_DIR": str(exchange),
                    f"MMEVAL_{upper}_WORLD_SIZE": "3",
                    f"MMEVAL_{upper}_RANK": str(rank),
                },
            ),
        )
        for rank in range(3)
    ]
    try:
        for rank, p in enumerate(procs):
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, f"rank {rank}: {err[-3000:]}"
            assert "accuracy_end_to_end" in out
    finally:
        for p in procs:
            p.kill()
    for shown in (f"export MMEVAL_{upper}_DIR=", f"MMEVAL_{upper}_WORLD_SIZE=3", f"MMEVAL_{upper}_RANK=$r"):
        assert shown in GUIDE.read_text(), f"the guide's launch commands do not set {shown}"


# -- the README's two commands (item 13) --------------------------------------------


def _readme_commands() -> Dict[str, str]:
    text = README.read_text()
    section = text.split("## The two commands", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| ([^|]+?) \| `([^`]+)` \|$", section, re.M)
    return {what.strip(): cmd for what, cmd in rows}


def test_readme_commands_use_the_runner_and_ci_runs_the_test_command() -> None:
    cmds = _readme_commands()
    assert cmds.get("run the main job") == "./tools/run-tox -e demo", cmds
    assert cmds.get("run the whole test suite") == "./tools/run-tox", cmds
    ci = [ln for ln in (ROOT / ".ci" / "run").read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert ci[-1] == cmds["run the whole test suite"], f".ci/run must end with the README's test command: {ci[-1]!r}"
    assert "runs exactly the README's test command" in (ROOT / ".ci" / "run").read_text()
    assert os.access(ROOT / "tools" / "run-tox", os.X_OK), "tools/run-tox must be executable"
    ignored = (ROOT / ".gitignore").read_text().split()
    assert ".venv-tox/" in ignored or ".venv-tox" in ignored, ".venv-tox must be in .gitignore"


def _externally_managed_python(where: Path) -> Path:
    """A Python installation (not a venv) that pip refuses to install into: this one's, marked per PEP 668."""
    base = Path(sys.base_prefix)
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    stdlib = Path(sysconfig.get_path("stdlib"))
    binary = base / "bin" / f"python{version}"
    assert binary.exists(), f"no {binary}: the base interpreter of this Python is not where expected"
    (where / "bin").mkdir(parents=True)
    shutil.copy2(binary, where / "bin" / "python3")
    lib = where / stdlib.relative_to(base)
    lib.mkdir(parents=True)
    for entry in stdlib.iterdir():
        (lib / entry.name).symlink_to(entry)
    for shared in (base / "lib").glob("libpython*.so*"):  # for a binary that finds libpython via $ORIGIN
        (where / "lib" / shared.name).symlink_to(shared)
    (lib / "EXTERNALLY-MANAGED").write_text("[externally-managed]\nError=managed by the system (test)\n")
    return where / "bin" / "python3"


def test_run_tox_works_on_an_externally_managed_python(tmp_path: Path) -> None:
    python = _externally_managed_python(tmp_path / "system-python")
    refused = subprocess.run(
        [str(python), "-m", "pip", "install", "--dry-run", "tox>=4.11"],
        capture_output=True,
        text=True,
        timeout=300,
        env=_clean_env(),
    )
    assert refused.returncode != 0 and "externally-managed-environment" in refused.stdout + refused.stderr, (
        "the test's Python should refuse `pip install` (PEP 668)"
    )

    # a checkout with the runner, .python-version and a tox.ini with one env per listed Python found here
    repo = tmp_path / "repo"
    (repo / "tools").mkdir(parents=True)
    shutil.copy2(ROOT / "tools" / "run-tox", repo / "tools" / "run-tox")
    shutil.copy2(ROOT / "tools" / "tox_summary.py", repo / "tools" / "tox_summary.py")  # its closing lines
    shutil.copy2(ROOT / "tools" / "prune_tox_env.py", repo / "tools" / "prune_tox_env.py")
    shutil.copy2(ROOT / ".python-version", repo / ".python-version")
    listed = (ROOT / ".python-version").read_text().split()
    versions = [v for v in listed if shutil.which(f"python{v}")]
    assert versions, f"none of the Pythons in .python-version ({listed}) is on PATH"
    envs = [f"py{v.replace('.', '')}" for v in versions]
    (repo / "tox.ini").write_text(
        "[tox]\nenv_list = " + ", ".join(envs) + "\nskip_missing_interpreters = false\n\n"
        "[testenv]\npackage = skip\ncommands = python -c \"import sys; print('PYVER', *sys.version_info[:2])\"\n"
        "commands_post = python {toxinidir}/tools/prune_tox_env.py {work_dir} {env_dir}\n"
    )

    env = _clean_env(PYTHON=str(python))
    listing = subprocess.run(
        [str(repo / "tools" / "run-tox"), "-l"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert listing.returncode == 0, listing.stdout[-3000:] + listing.stderr[-3000:]
    assert listing.stdout.split() == envs
    assert (repo / ".venv-tox" / "bin" / "tox").exists()

    run = subprocess.run(
        [str(repo / "tools" / "run-tox")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    for v in versions:
        assert f"PYVER {v.replace('.', ' ')}" in run.stdout, f"tox did not run on Python {v}:\n{run.stdout[-3000:]}"
    # the whole suite leaves no env behind (a machine with less free disk than all envs together runs it) ...
    # (the env keeps its log/, a few KB, where tox writes the last command's log)
    kept_envs = [name for name in envs if (repo / ".tox" / name / "bin").exists()]
    assert not kept_envs, f"the whole-suite run kept its envs: {kept_envs}"
    assert not (repo / ".tox" / ".mmeval-prune").exists(), "the run left its prune marker behind"
    # ... while a run of named envs, and a whole-suite run asked to, keep them for the next run
    named = subprocess.run(
        [str(repo / "tools" / "run-tox"), "-e", envs[0]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert named.returncode == 0, named.stdout[-3000:] + named.stderr[-3000:]
    assert (repo / ".tox" / envs[0] / "bin").is_dir(), "`run-tox -e NAME` removed the env"
    kept = subprocess.run(
        [str(repo / "tools" / "run-tox")],
        cwd=tmp_path,
        env={**env, "MMEVAL_TOX_KEEP_ENVS": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert kept.returncode == 0, kept.stdout[-3000:] + kept.stderr[-3000:]
    assert all((repo / ".tox" / name / "bin").is_dir() for name in envs), "MMEVAL_TOX_KEEP_ENVS=1 removed envs"


# -- the docs speak to users, and every link leads somewhere -------------------------

#: What users read: the README, the core's package description, every page under docs/, the plugins' READMEs.
USER_DOCS = sorted(
    [README, ROOT / "core" / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "plugins").glob("*/README.md")]
)

#: Words of the project's own bookkeeping, which mean nothing to a user.
INTERNAL_WORDS = (
    r"\bissues? #?\d+",  # "(issue 6)", "issues 7 and 15"
    r"\bthe issue\b",  # "the yardstick"
    r"\bitems? \d+\b",  # "item 11"
    r"\bseeds'",  # "the seeds' tutorial scripts"
    r"\bthis stop\b",
    r"\bsession\b",
    r"\bthe lead\b",
    r"\bfirst hour\b",
    r"\bround two\b",
)


def _prose(text: str) -> str:
    """``text`` without fenced code blocks and inline code (links and words there are code, not prose)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "``", text)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: Dict[str, int] = {}
    anchors = set()
    for heading in re.findall(r"^#{1,6} (.+)$", re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M), re.M):
        slug = _slug(heading)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(doc: Path) -> None:
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", _prose(doc.read_text())):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (doc.parent / file_part).resolve() if file_part else doc
        if not dest.exists():
            broken.append(f"{target}: no {dest}")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading with anchor #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"{doc.relative_to(ROOT)} has broken links:\n  " + "\n  ".join(broken)


def test_the_slug_rule_matches_githubs() -> None:
    assert _slug("Units: fractions and percentages") == "units-fractions-and-percentages"
    assert _slug("What MMEval 0.2.1 has and mmeval does not (yet)") == "what-mmeval-021-has-and-mmeval-does-not-yet"
    assert _slug("The transport contract: `FramedDistBackend`") == "the-transport-contract-framedDistbackend".lower()


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_docs_use_no_internal_words(doc: Path) -> None:
    text = doc.read_text()
    found = [
        f"line {text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
        for pattern in INTERNAL_WORDS
        for m in re.finditer(pattern, text, re.I)
    ]
    assert not found, f"{doc.relative_to(ROOT)} speaks of the project's bookkeeping, not to users:\n  " + "\n  ".join(
        found
    )


def test_docs_index_links_every_page() -> None:
    index = (ROOT / "docs" / "index.md").read_text()
    linked = set(re.findall(r"\]\(([\w.-]+\.md)(?:#[^)]*)?\)", index))
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"index.md"}
    assert pages <= linked, f"docs/index.md does not link {sorted(pages - linked)}"
    readme = README.read_text()
    for page in ("docs/index.md", "docs/reliability.md", "docs/security.md", "docs/metrics.md"):
        assert f"]({page}" in readme, f"the README does not link {page}"


def test_every_exported_metric_is_listed_with_its_unit() -> None:
    import mmeval.metrics
    from mmeval.core import BaseMetric

    exported = {
        name
        for name in mmeval.metrics.__all__
        if isinstance(getattr(mmeval.metrics, name), type) and issubclass(getattr(mmeval.metrics, name), BaseMetric)
    }
    assert exported, "mmeval.metrics exports no metric"
    metrics_doc = (ROOT / "docs" / "metrics.md").read_text()
    readme = README.read_text()
    for name in sorted(exported):
        assert f"`{name}`" in metrics_doc, f"docs/metrics.md does not list {name}"
        canonical = getattr(mmeval.metrics, name).__name__
        assert f"`{name}`" in readme or f"`{canonical}`" in readme, f"the README's metric list lacks {name}"
        assert f"(#{canonical.lower()})" in metrics_doc and f"## {canonical}\n" in metrics_doc, (
            f"docs/metrics.md has no section for {canonical}"
        )
    # the units differ between metrics (MMEval's conventions): both pages say so
    for text in (readme, metrics_doc):
        assert "fraction" in text and "percentage" in text and "MMEval 0.2.1" in text


def test_readme_says_how_to_pick_the_torch_build() -> None:
    section = README.read_text().split("## Install\n", 1)[1].split("\n## ", 1)[0]
    lines = [ln.split("#", 1)[0].strip() for ln in section.split("```bash", 1)[1].split("```", 1)[0].splitlines()]
    torch_plugin = next(i for i, ln in enumerate(lines) if "./plugins/torch_backend" in ln)
    cpu = [
        i
        for i, ln in enumerate(lines)
        if ln.startswith("pip install torch ") and "--index-url https://download.pytorch.org/whl/cpu" in ln
    ]
    assert cpu and cpu[0] < torch_plugin, "the install block must install torch's CPU build before the torch plugin"
    assert "CUDA" in section and "download.pytorch.org/whl/cu" in section, (
        "the README must say how to pick a CUDA build"
    )


def test_readme_shows_the_backend_neutral_rank_and_world_size() -> None:
    section = README.read_text().split("## The API in five lines", 1)[1].split("\n## ", 1)[0]
    assert "get_rank_and_world_size()" in section and "from mmeval.core.dist import get_rank_and_world_size" in section
    assert "dist_comm.rank" in section and "dist_comm.world_size" in section
