"""Sphinx configuration of the course site (`make site`; tools/build_site.py stages the sources and calls Sphinx).

The sources are notebooks that have already run (MyST-NB executes nothing here). Nothing on a page may
reach the network: no widget renderer, no MathJax from a CDN, no web fonts (the theme ships its icons).
"""
project = "Feed the GPUs"
author = "the Feed the GPUs contributors"
copyright = "the Feed the GPUs contributors"
html_title = "Feed the GPUs"

extensions = ["myst_nb"]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
root_doc = "index"

# Notebooks come executed (by the test suite's nbval run or by tools/build_site.py): render them as they are.
nb_execution_mode = "off"
nb_merge_streams = True
nb_output_stderr = "show"
# MyST-NB would add require.js and the widget renderer from a CDN to pages with widget state; the build strips
# that state and puts a one-line note where each widget was.
nb_ipywidgets_js = {}
# Headings get JupyterLab's anchors, so links like notebook.ipynb#1.-The-environment-report (which work in
# JupyterLab) resolve here too; sphinx-build runs in the repository root, where `tools` imports.
myst_heading_anchors = 6
myst_heading_slug_func = "tools.build_site.jupyter_slug"
myst_enable_extensions = ["html_image"]

html_theme = "sphinx_book_theme"
html_theme_options = {
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "use_repository_button": False,
    "show_toc_level": 2,
    "navigation_with_keys": False,
    # No top bar: without this pydata-sphinx-theme adds one holding a second search button (the sidebar has one).
    "navbar_persistent": [],
}
# Light or dark follows the reader's system; without a value the theme logs a console error on every page.
html_context = {"default_mode": "auto"}
html_static_path = ["_static"]
html_css_files = ["course.css"]
html_copy_source = False  # the executed .ipynb would double the site's size; the repository has the notebooks
html_show_sourcelink = False
html_last_updated_fmt = None
