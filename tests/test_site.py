"""The static site (`make site`): every page opens offline in headless Chromium with nothing failed, missing or broken.

It renders the notebooks that the suite executed earlier in the same run (nbval: notebooks/ and solutions/;
tests/test_exercises.py: exercises/; tests/conftest.py keeps them and runs this file last); only a notebook that no
test executed in this run (this file run alone, or a stale copy) is executed here, once.
"""
from __future__ import annotations

import functools
import html
import http.server
import json
import os
import re
import threading
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
import pytest
from conftest import ROOT, ExecutedNotebooks, suite_run
from test_browser import CHROMIUM, CHROMIUM_ARGS

from helpers.course import LESSONS, REQUIRE_BROWSER_VAR
from helpers.errors import WIDTH
from tools import build_site

pytestmark = pytest.mark.timeout(1800)  # run alone, with nothing executed before, the build executes every notebook

IDS = re.compile(r"""\s(?:id|name)\s*=\s*(?:"([^"]*)"|'([^']*)')""")
TAG = re.compile(r"<[^>]+>")
BROKEN_IMAGES = """async () => {
  const images = [...document.images];
  images.forEach(i => { i.loading = "eager"; });
  await Promise.all(images.map(i => i.complete ? null : new Promise(done => { i.onload = i.onerror = done; })));
  return images.filter(i => !i.complete || i.naturalWidth === 0).map(i => i.getAttribute("src"));
}"""
LINKS = "() => [...document.querySelectorAll('a[href]')].map(a => a.href)"


def _chromium_or_skip() -> None:
    if not Path(CHROMIUM).exists():
        if os.environ.get(REQUIRE_BROWSER_VAR) == "1":
            pytest.fail(f"{REQUIRE_BROWSER_VAR}=1 but {CHROMIUM} is missing: apt-get install chromium")
        pytest.skip(f"site browser test skipped: {CHROMIUM} not found (apt-get install chromium)")


@pytest.fixture(scope="module")
def site(request, tmp_path_factory):
    """The site built from this run's executed notebooks, executing only what no test executed."""
    plugin = suite_run(request.config.pluginmanager.get_plugin(ExecutedNotebooks.name))
    failed = sorted(p.relative_to(ROOT).as_posix() for p in plugin.failed if p.is_relative_to(ROOT))
    if failed:
        pytest.fail(f"not rendered: {', '.join(failed)} failed under nbval in this run (see those failures)")
    base = tmp_path_factory.mktemp("site")
    # What this run executed is current even if the course code changed since; anything else must be up to date.
    todo = [source for source in build_site.sources() if source not in plugin.kept and not build_site.is_fresh(source)]
    executed_here = build_site.ensure_executed(todo, fresh=True, log=lambda line: None)
    folder = build_site.build(execute_missing=False, stage_dir=base / "src", site_dir=base / "site", log=lambda line: None,
                              current={*plugin.kept, *executed_here})
    twice = sorted(p.relative_to(ROOT).as_posix() for p in set(executed_here) & set(plugin.kept))
    assert not twice, f"executed twice in one run: {twice}"
    return folder, executed_here, dict(plugin.kept)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def served(site):
    """The site on a static server at 127.0.0.1 (free port), stopped afterwards."""
    folder = site[0]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", folder
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser():
    _chromium_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@functools.lru_cache(maxsize=None)
def _ids(path: Path) -> frozenset[str]:
    return frozenset(html.unescape(double or single) for double, single in IDS.findall(path.read_text(errors="replace")))


def _local_file(url: str, origin: str, folder: Path) -> Path | None:
    """The file a same-site URL points at (None for other sites)."""
    parts = urlsplit(url)
    if origin == "file://":
        if parts.scheme != "file":
            return None
        path = Path(unquote(parts.path))
    else:
        if f"{parts.scheme}://{parts.netloc}" != origin:
            return None
        path = folder / unquote(parts.path).lstrip("/")
    return path / "index.html" if url.split("#")[0].split("?")[0].endswith("/") else path


def page_problems(browser, url: str, origin: str, folder: Path) -> list[str]:
    """Everything wrong with one page: a request leaving the site (blocked), a failed request or response, a console
    error, an image that did not load, an internal link to a file or an anchor that does not exist."""
    problems: list[str] = []
    context = browser.new_context()

    def route(request_route):
        target = request_route.request.url
        if target.startswith(origin) or target.startswith(("data:", "blob:")):
            request_route.continue_()
        else:
            problems.append(f"request leaves the site: {target}")
            request_route.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url} ({r.failure})"))
    page.on("response", lambda r: r.status >= 400 and problems.append(f"HTTP {r.status}: {r.url}"))
    page.on("console", lambda m: m.type == "error" and problems.append(f"console error: {m.text}"))
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    try:
        page.goto(url, wait_until="load")
        page.wait_for_load_state("networkidle")
        problems += [f"image did not load: {src}" for src in page.evaluate(BROKEN_IMAGES)]
        for href in sorted(set(page.evaluate(LINKS))):
            target = _local_file(href, origin, folder)
            if target is None:
                continue  # a link to another site: a link, not a request
            if not target.is_file():
                problems.append(f"broken link: {href}")
            elif "#" in href and href.split("#", 1)[1] and target.suffix == ".html":
                anchor = unquote(href.split("#", 1)[1])
                if anchor not in _ids(target):
                    problems.append(f"broken anchor: {href}")
    finally:
        context.close()
    return [problem for i, problem in enumerate(problems) if problem not in problems[:i]]


def _pages(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.html") if "_static" not in p.relative_to(folder).parts)


def _text(path: Path) -> str:
    """A page's visible text, whitespace folded."""
    return " ".join(html.unescape(TAG.sub(" ", path.read_text())).split())


@pytest.mark.browser
def test_every_page_opens_offline(browser, served):
    """Every page, served by a local static server with every other host blocked: nothing fails or is broken."""
    origin, folder = served
    pages = _pages(folder)
    assert len(pages) >= len(build_site.sources()) + 1
    found = {}
    for path in pages:
        problems = page_problems(browser, f"{origin}/{path.relative_to(folder).as_posix()}", origin, folder)
        if problems:
            found[path.relative_to(folder).as_posix()] = problems
    assert not found, json.dumps(found, indent=1)[:4000]


@pytest.mark.browser
def test_pages_open_from_file_urls(browser, site):
    """Opened from disk (file://), the home page, the search page and the first page of each folder (lessons,
    exercises, solutions, guides) load everything they need from the site's folder, every link resolving."""
    folder = site[0]
    firsts = [min(folder.joinpath(name).glob("*.html")) for name in (*build_site.FOLDERS, "docs")]
    found = {}
    for path in (folder / "index.html", folder / "search.html", *firsts):
        problems = page_problems(browser, path.as_uri(), "file://", folder)
        if problems:
            found[path.relative_to(folder).as_posix()] = problems
    assert not found, json.dumps(found, indent=1)[:4000]


def _search(browser, url: str, origin: str) -> list[str]:
    """The links the site's search page lists for a query, with every request outside `origin` blocked."""
    context = browser.new_context()
    context.route("**/*", lambda r: r.continue_() if r.request.url.startswith(origin) else r.abort())
    page = context.new_page()
    try:
        page.goto(url)
        page.wait_for_selector("ul.search li a", timeout=30_000)
        return page.evaluate("() => [...document.querySelectorAll('ul.search li a')].map(a => a.getAttribute('href'))")
    finally:
        context.close()


@pytest.mark.browser
def test_search_finds_a_lesson_offline(browser, served, site):
    """Search works from the static server and from disk: a query lists the lesson that teaches it."""
    origin, _ = served
    for url, where in ((f"{origin}/search.html?q=WeightedRandomSampler", origin),
                       ((site[0] / "search.html").as_uri() + "?q=WeightedRandomSampler", "file://")):
        hits = _search(browser, url, where)
        assert any("02_rebalancing" in hit for hit in hits), (url, hits)


@pytest.mark.browser
def test_check_catches_broken_pages(browser, served, tmp_path):
    """Control: the same check on a copy of a lesson page with a missing image, a broken link and anchor, a CDN
    script and a console error reports each of them, and finds nothing on the page as built."""
    origin, folder = served
    lesson = folder / "notebooks" / f"{LESSONS[1].stem}.html"
    broken = lesson.with_name("broken-control.html")
    planted = ('<img src="../_images/no-such-plot.png" alt="x"><a href="no-such-lesson.html">x</a>'
               '<a href="#no-such-section">x</a><script src="https://cdn.jsdelivr.net/npm/x@1/x.js"></script>'
               '<script>console.error("planted error")</script>')
    broken.write_text(lesson.read_text().replace("</body>", planted + "</body>"))
    try:
        found = "\n".join(page_problems(browser, f"{origin}/notebooks/{broken.name}", origin, folder))
        clean = page_problems(browser, f"{origin}/notebooks/{lesson.name}", origin, folder)
    finally:
        broken.unlink()
    for expected in ("image did not load: ../_images/no-such-plot.png", "broken link: " + f"{origin}/notebooks/no-such-lesson.html",
                     "broken anchor: " + f"{origin}/notebooks/broken-control.html#no-such-section",
                     "request leaves the site: https://cdn.jsdelivr.net/npm/x@1/x.js", "console error: planted error"):
        assert expected in found, f"the check missed {expected!r}; it found:\n{found}"
    assert clean == []


def test_every_notebook_is_a_page_with_its_outputs_and_hardware(site):
    """Each lesson, exercise and solution has a page that says where it ran and shows what it printed and drew."""
    folder = site[0]
    for source in build_site.sources():
        page = folder / source.parent.name / f"{source.stem}.html"
        assert page.is_file(), f"no page for {source.relative_to(ROOT)}"
        nb = nbformat.read(build_site.executed_path(source), as_version=4)
        meta = nb.metadata[build_site.META]
        text, raw = _text(page), page.read_text()
        assert "Executed on:" in text and html.unescape(meta["hardware"]["summary"]) in text, f"{page.name}: no hardware note"
        outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
        images = sum("image/png" in o.get("data", {}) for o in outputs)
        assert len(re.findall(r'<img[^>]+src="\.\./_images/', raw)) == images, f"{page.name}: {images} plots executed"
        for output in outputs:
            if output.output_type == "stream" and "\r" not in output.text and "\x1b" not in output.text:
                first = " ".join(next((line for line in output.text.splitlines() if line.strip()), "").split())
                assert first in text, f"{page.name}: printed {first!r}, not on the page"
        for output in outputs:  # tables and other HTML a cell displayed (not widgets: they become a note)
            data = output.get("data", {})
            if "text/html" in data and build_site.WIDGET_MIME not in data:
                words = " ".join(html.unescape(TAG.sub(" ", data["text/html"])).split())[:60]
                assert words in text, f"{page.name}: displayed {words!r}, not on the page"
        widgets = sum(build_site.WIDGET_MIME in o.get("data", {}) for o in outputs)
        assert raw.count("course-widget-note") == widgets, f"{page.name}: {widgets} widgets, each needs its note"


def _shown_as_text(output: nbformat.NotebookNode) -> str:
    """What a code cell's output shows as plain text: what it printed (stdout), or a value shown only as text."""
    if output.output_type == "stream":
        return output.text if output.name == "stdout" else ""  # stderr: a library's warning, not ours to wrap
    data = output.get("data", {})
    return data.get("text/plain", "") if set(data) == {"text/plain"} else ""  # HTML, plots, widgets: not text


def long_printed_lines(nb: nbformat.NotebookNode) -> list[str]:
    """Lines a notebook showed as text longer than helpers.errors.WIDTH: JupyterLab breaks them anywhere, mid-word too
    (its CSS: word-break: break-all); what the notebook's own code or the course's helpers print must fit."""
    return [f"cell {index}: {line[:60]}... ({len(line)} characters)" for index, cell in enumerate(nb.cells)
            if cell.cell_type == "code" for output in cell.outputs
            for line in _shown_as_text(output).splitlines() if len(line) > WIDTH]


def test_printed_lines_fit_a_notebook(site):
    long = {source.name: found for source in build_site.sources()
            if (found := long_printed_lines(nbformat.read(build_site.executed_path(source), as_version=4)))}
    assert long == {}, long


def test_long_printed_lines_are_found():
    cell = nbformat.v4.new_code_cell("print(...)", outputs=[
        nbformat.v4.new_output("stream", name="stdout", text="short\n" + "w " * 50 + "\n" + "x" * 101 + "\n"),
        nbformat.v4.new_output("stream", name="stderr", text="y" * 300),  # a library's warning: not ours to wrap
        nbformat.v4.new_output("execute_result", data={"text/plain": "z" * 102}),  # a check's verdict, shown as text
        nbformat.v4.new_output("display_data", data={"text/plain": "v" * 300, "text/html": "<b>table</b>"})])
    assert long_printed_lines(nbformat.v4.new_notebook(cells=[cell])) == [f"cell 0: {'x' * 60}... (101 characters)",
                                                                          f"cell 0: {'z' * 60}... (102 characters)"]


def test_home_page_maps_the_course_and_links_docs(site):
    folder = site[0]
    home = (folder / "index.html").read_text()
    for lesson in LESSONS:
        assert f'href="notebooks/{lesson.stem}.html"' in home and html.escape(lesson.title) in home, lesson.stem
    for doc in sorted((ROOT / "docs").glob("*.md")):
        assert (folder / "docs" / f"{doc.stem}.html").is_file() and f'href="docs/{doc.stem}.html"' in home, doc.name
    assert "Executed on:" in _text(folder / "index.html")


def test_no_page_loads_anything_from_elsewhere(site):
    """No script, stylesheet, image or font named by URL; no widget renderer or MathJax at all (static check)."""
    folder = site[0]
    remote = re.compile(r"""<(?:script|link|img|iframe|source)\b[^>]*\b(?:src|href)\s*=\s*["'](?:https?:)?//""", re.I)
    for path in [*_pages(folder), *folder.rglob("*.css")]:
        text = path.read_text(errors="replace")
        assert not remote.search(text), f"{path.relative_to(folder)} loads {remote.search(text).group(0)}"
        assert not re.search(r"<script[^>]+(?:embed-amd|require|mathjax)", text, re.I), f"{path.name}: a widget renderer or MathJax"
        assert not re.search(r"url\((['\"]?)(?:https?:)?//", text), f"{path.relative_to(folder)}: a remote url() (font?)"


def test_the_suites_runs_are_reused(site, request):
    """In a run that executed notebooks (nbval, tests/test_exercises.py), the site used those runs: it executed none
    of them again, and each page says which run it shows."""
    _, executed_here, kept = site
    plugin = suite_run(request.config.pluginmanager.get_plugin(ExecutedNotebooks.name))
    assert set(kept) == {p for p in plugin.seen if p.is_relative_to(ROOT)}, "every notebook the suite ran whole must be kept"
    assert not set(executed_here) & set(kept)
    for source, executed in kept.items():
        runner = json.loads(executed.read_text())["metadata"][build_site.META]["runner"]
        expected = "the test suite (nbval)" if source.parent.name != "exercises" else "the test suite (tests/test_exercises.py)"
        assert runner == expected, (source.name, runner)
    for path in plugin.exercises:  # each exercise tests/test_exercises.py ran in this run is one the site shows
        assert path in kept, (f"tests/test_exercises.py executed {path.name} in this run but its run was not kept "
                              "(did that test fail, or stop using nbclient.NotebookClient.execute?)")


def test_a_passing_nbclient_run_of_a_course_notebook_is_kept(tmp_path):
    """The plugin matches a notebook that a test executed with nbclient to its source by its cells; others are ignored."""
    plugin = ExecutedNotebooks(tmp_path / "executed")
    source = build_site.sources()[-1]
    nb = nbformat.read(source, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="ran\n")]
    unrelated = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")])
    plugin._keep_nbclient_runs([unrelated, nb], "the test suite (tests/test_x.py)")
    assert plugin.kept == {source: build_site.executed_path(source, tmp_path / "executed")} and plugin.seen == {source}
    assert build_site.is_fresh(source, tmp_path / "executed")
    kept = nbformat.read(plugin.kept[source], as_version=4)
    assert kept.metadata[build_site.META]["runner"] == "the test suite (tests/test_x.py)"


def test_workers_runs_reach_the_site_test_of_a_later_pytest_run(tmp_path, monkeypatch):
    """Under pytest-xdist a worker sends what it kept to the main process, which writes the run's to SUITE_RUN; make
    test's second pytest run (the site test) takes it when it carries the same COURSE_SUITE_RUN, and only then."""
    import types

    import conftest

    monkeypatch.setattr(conftest, "SUITE_RUN", tmp_path / "suite-run.json")
    monkeypatch.setattr(conftest, "EXECUTED_DIR", tmp_path / "executed")
    monkeypatch.setenv(conftest.SUITE_RUN_VAR, "run-1")
    lesson, exercise = ROOT / "notebooks" / "00_setup_check.ipynb", ROOT / "exercises" / "00_setup_check_exercises.ipynb"
    worker = ExecutedNotebooks(tmp_path / "executed")
    worker.kept[lesson] = tmp_path / "executed" / "lesson.ipynb"
    worker.seen.add(lesson)
    worker_session = types.SimpleNamespace(config=types.SimpleNamespace(workeroutput={}))
    worker.pytest_sessionfinish(worker_session)
    main = ExecutedNotebooks(tmp_path / "executed")
    main.pytest_runtest_logreport(types.SimpleNamespace(  # the main process sees every worker's reports
        nodeid=f"tests/test_exercises.py::test_shipped_exercise_reports_not_implemented[{exercise.name}]",
        when="call", failed=False, skipped=False))
    main.pytest_testnodedown(types.SimpleNamespace(workeroutput=worker_session.config.workeroutput), None)
    main.pytest_sessionfinish(types.SimpleNamespace(config=types.SimpleNamespace()))
    site_run = ExecutedNotebooks(tmp_path / "executed")  # the second pytest run: it executed nothing itself
    got = suite_run(site_run)
    assert (got.kept, got.seen, got.exercises, got.failed) == ({lesson: tmp_path / "executed" / "lesson.ipynb"}, {lesson},
                                                                {exercise}, set())
    monkeypatch.setenv(conftest.SUITE_RUN_VAR, "run-2")
    assert suite_run(site_run) is site_run  # another make test's file: nothing taken from it
    monkeypatch.setenv(conftest.SUITE_RUN_VAR, "run-1")
    site_run.seen.add(lesson)
    assert suite_run(site_run) is site_run  # a run that executed notebooks itself renders its own


class IPyNbCell:
    """Stands in for nbval's cell item (the plugin tells cells by this class name)."""

    def __init__(self, path: Path, cell_num: int) -> None:
        self.parent, self.cell_num, self.test_outputs = self, cell_num, []
        self.path = path


def test_a_notebook_run_cut_short_leaves_no_older_executed_copy(tmp_path):
    """A run stopped after the first cell (Ctrl-C, a crash) must not leave the site the copy of an earlier run."""
    lesson = ROOT / "notebooks" / "00_setup_check.ipynb"
    plugin = ExecutedNotebooks(tmp_path / "executed")
    older = build_site.executed_path(lesson, tmp_path / "executed")
    older.parent.mkdir(parents=True)
    older.write_text("{}")
    first, second = IPyNbCell(lesson, 0), IPyNbCell(lesson, 1)
    second.parent = first.parent
    running = plugin.pytest_runtest_protocol(first, second)
    next(running)  # the first cell is about to run
    assert not older.exists()
    with pytest.raises(StopIteration):
        running.send(None)  # it ran; more cells to come: nothing kept yet
    assert plugin.outputs == {lesson: {0: []}} and not older.exists()


def test_executed_copy_goes_stale_and_only_complete_runs_are_kept(tmp_path):
    source = tmp_path / "lessons" / "00_x.ipynb"
    source.parent.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# X"), nbformat.v4.new_code_cell("print(6 * 7)"), nbformat.v4.new_code_cell("6 * 7")]
    nbformat.write(nb, source)
    machine = {"summary": "test machine", "rows": [["CPU", "none"]]}
    with pytest.raises(ValueError, match="outputs for code cells \\[0\\], but it has 2 code cells"):
        build_site.from_cell_outputs(source, {0: []}, "test", tmp_path / "executed", machine)
    assert not build_site.is_fresh(source, tmp_path / "executed")
    outputs = {0: [nbformat.v4.new_output("stream", name="stdout", text="42\n")],
               1: [nbformat.v4.new_output("execute_result", data={"text/plain": "42"})]}
    kept = build_site.from_cell_outputs(source, outputs, "test", tmp_path / "executed", machine)
    assert build_site.is_fresh(source, tmp_path / "executed")
    assert [c.execution_count for c in nbformat.read(kept, as_version=4).cells[1:]] == [1, 2]
    nb.cells[1].source = "print(7 * 6)"
    nbformat.write(nb, source)
    assert not build_site.is_fresh(source, tmp_path / "executed")
    (executed,) = build_site.ensure_executed([source], tmp_path / "executed", log=lambda line: None)  # make site alone runs it
    assert executed == source and build_site.is_fresh(source, tmp_path / "executed")
    page = build_site.page_notebook(build_site.executed_path(source, tmp_path / "executed"))
    assert "Executed on:" in page.cells[0].source and page.cells[2].outputs[0].text == "42\n"


def test_widgets_become_a_note_and_their_state_goes(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["widgets"] = {build_site.WIDGET_STATE: {"state": {}}}
    nb.metadata[build_site.META] = {"hardware": {"summary": "m", "rows": []}, "executed": "now", "runner": "test"}
    nb.cells = [nbformat.v4.new_code_cell("w", outputs=[nbformat.v4.new_output(
        "display_data", data={build_site.WIDGET_MIME: {"model_id": "1"}, "text/plain": "interactive(children=...)"})])]
    nbformat.write(nb, tmp_path / "w.ipynb")
    page = build_site.page_notebook(tmp_path / "w.ipynb")
    assert "widgets" not in page.metadata
    (output,) = page.cells[1].outputs
    assert "Interactive control" in output.data["text/html"] and build_site.WIDGET_MIME not in output.data


def test_a_link_to_a_missing_page_or_section_fails_the_build(tmp_path):
    """Control for the build: Sphinx runs with warnings as errors, so a link (JupyterLab-style anchors included) to a
    page or a heading that does not exist stops `make site` and names it; the same page with good links builds."""
    src = tmp_path / "src"
    (src / "docs").mkdir(parents=True)
    (src / "index.md").write_text("# Home\n\n```{toctree}\ndocs/a\n```\n")
    page = src / "docs" / "a.md"
    page.write_text("# A\n\n## 1. A real section\n\n[here](#1.-A-real-section) [home](../index.md)\n")
    assert (build_site.sphinx_build(src, tmp_path / "site") / "docs" / "a.html").is_file()
    page.write_text(page.read_text() + "[gone](../notebooks/missing.ipynb#1.-Setup) [nowhere](#2.-No-such-section)\n")
    with pytest.raises(RuntimeError) as failure:
        build_site.sphinx_build(src, tmp_path / "site")
    for target in ("../notebooks/missing.ipynb#1.-Setup", "2.-No-such-section"):
        assert f"target not found: '{target}'" in str(failure.value), str(failure.value)
