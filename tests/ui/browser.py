"""Chromium, driven through its chromedriver, for the view's browser test.

Debian's packages (``/usr/bin/chromium``, ``/usr/bin/chromedriver``) by default;
elsewhere the ``CHROMIUM`` and ``CHROMEDRIVER`` environment variables, or
``chromium`` and ``chromedriver`` on PATH (README.md, "Requirements").
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service


def _program(variable: str, name: str) -> Path:
    """The program ``variable`` names, else Debian's, else ``name`` found on PATH."""
    if os.environ.get(variable):
        return Path(os.environ[variable])
    debian = Path("/usr/bin") / name
    return debian if debian.exists() else Path(shutil.which(name) or debian)


CHROMIUM = _program("CHROMIUM", "chromium")
CHROMEDRIVER = _program("CHROMEDRIVER", "chromedriver")
# without the network switches chromium keeps calling home on a closed network
SWITCHES = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1440,1200",
)


def installed() -> bool:
    """Whether chromium and its driver are there."""
    return CHROMIUM.exists() and CHROMEDRIVER.exists()


@contextmanager
def chromium(profile: Path, log: Path) -> Iterator[webdriver.Chrome]:
    """A headless chromium on a fresh profile; it and its driver end when the block does.

    :param profile: an empty folder for the browser's profile.
    :param log: where chromedriver writes its log.
    """
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for switch in SWITCHES:
        options.add_argument(switch)
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(
        service=Service(str(CHROMEDRIVER), log_output=str(log)), options=options
    )
    try:
        driver.set_page_load_timeout(60)
        yield driver
    finally:
        driver.quit()  # ends chromium and the chromedriver process it started
