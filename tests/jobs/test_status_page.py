"""The status page (``GET /`` of ``python -m jobs serve``) in a real browser: Debian's Chromium driven through its
chromedriver by Selenium. Log in with a team's token, see a running job's bar move, cancel it from the page, see
its state change. On a failure the test leaves a screenshot and the page's HTML and names them in its message."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.jobs.conftest import corpus
from tests.jobs.http import TOKENS, api_spec

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")


def browser(tmp_path: Path) -> Any:
    if CHROMIUM is None or CHROMEDRIVER is None:
        if os.environ.get("CI"):
            pytest.fail("chromium or chromedriver is missing: .ci/run installs Debian's chromium and chromium-driver")
        pytest.skip("no browser: apt-get install chromium chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,900",
                 f"--user-data-dir={tmp_path / 'chromium-profile'}"):  # fmt: skip
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def test_a_team_logs_in_sees_its_job_move_and_cancels_it(tmp_path, services, server, demo_artifact, workers) -> None:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    api = server()
    (tmp_path / "corpora").mkdir()
    source = corpus(tmp_path / "corpora" / "in.jsonl", 3000)
    body = api_spec(demo_artifact, [str(source)], memory="off")  # every document translated: the job takes a while
    code, submitted = api.call("POST", "/v1/jobs", body)
    assert code == 201, submitted
    job_id = submitted["id"]
    driver = browser(tmp_path)
    # The page redraws its rows as it polls: an element found a moment ago may be gone (stale), so reads go
    # through one script call and the wait looks again.
    wait = WebDriverWait(driver, 120, poll_frequency=0.2, ignored_exceptions=[StaleElementReferenceException])
    row = f"tr.job[data-id='{job_id}']"
    read = lambda selector, field: driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e && e[arguments[1]];", selector, field
    )
    done = lambda: int(read(f"{row} progress", "value") or 0)
    state = lambda: (read(f"{row} .state", "innerText") or "").strip()
    try:
        driver.get(f"http://127.0.0.1:{api.port}/")
        driver.find_element(By.ID, "token").send_keys(TOKENS["books"])
        driver.find_element(By.ID, "enter").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, row))
        assert state() == "running" and done() == 0
        assert "workers up: 0" in driver.find_element(By.ID, "workers").text
        workers()
        wait.until(lambda _: done() > 0)
        first = done()
        wait.until(lambda _: done() > first)  # the bar moves as parts are written
        assert done() < 3000
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, f"{row} button.cancel").click() or True)
        wait.until(lambda _: state() in {"cancelling", "cancelled"})
        wait.until(lambda _: state() == "cancelled")
        assert not driver.find_elements(By.CSS_SELECTOR, f"{row} button.cancel")
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, row).click() or True)
        wait.until(lambda d: f"{job_id} (web): cancelled" in d.find_element(By.ID, "detail").text)
    except Exception as err:
        shot, page = tmp_path / "status-page.png", tmp_path / "status-page.html"
        driver.save_screenshot(str(shot))
        page.write_text(driver.page_source)
        raise AssertionError(f"{err!r}; the page as the browser showed it: {shot} and {page}") from err
    finally:
        driver.quit()
    assert api.call("GET", f"/v1/jobs/{job_id}")[1]["state"] == "cancelled"


def test_a_wrong_token_is_told_so_on_the_page(tmp_path, services, server) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    api = server()
    driver = browser(tmp_path)
    try:
        driver.get(f"http://127.0.0.1:{api.port}/")
        driver.find_element(By.ID, "token").send_keys("not-a-token-of-any-team")
        driver.find_element(By.ID, "enter").click()
        WebDriverWait(driver, 30).until(lambda d: d.find_element(By.ID, "problem").text)
        assert "Bearer TOKEN" in driver.find_element(By.ID, "problem").text
        assert not driver.find_element(By.ID, "board").is_displayed()
    finally:
        driver.quit()
