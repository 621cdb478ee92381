"""A lab's first hour, played by its admin and a colleague on a real ``jetyard up`` (Docker
backend), with no GraphQL typed by hand: the admin brings the colleague in with one command
(a project by name), the colleague signs in and runs a session from the CLI and from the
console; the admin adds people from the console's People page (a password and a keypair's
secret shown once) and a whole class from a CSV file (a bad line names itself and creates
nobody); a person whose keypair was revoked is told what to do, never ``internal``."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from jetyard.sdk import Client
from schemas.tenancy import project_id_for
from tests.browser.support import Researcher, shot, sign_in
from tests.browser.test_console import FINAL, new_session, status
from tests.e2e.conftest import TEST_IMAGE, Jetyard, wait_until
from tests.e2e.user_support import jetyard, keypair_env, user_env

ROOT = Path(__file__).parents[2]
# A whole day's first hour per test, and the module's stack starts or stops inside one of them.
pytestmark = pytest.mark.timeout(300)


def admin_env(tmp_path: Path, stack: Jetyard) -> dict[str, str]:
    return user_env(tmp_path / "admin", **keypair_env(stack))


def login(tmp_path: Path, stack: Jetyard, email: str, password: str) -> dict[str, str]:
    """A person's own environment, signed in with their password as the README says."""
    env = user_env(tmp_path / email, JETYARD_ENDPOINT=stack.url)
    signed = jetyard(env, "login", "--email", email, typed=password + "\n")
    assert signed.returncode == 0, signed.stderr
    return env


def test_the_admin_adds_a_colleague_who_runs_sessions_from_the_cli_and_the_console(
    page: Page, stack: Jetyard, tmp_path: Path
) -> None:
    admin = admin_env(tmp_path, stack)
    email = f"colleague-{stack.port}@example.org"

    wrong = jetyard(admin, "admin", "user", "create", email, "--project", "nosuch")
    assert wrong.returncode == 1, wrong.stderr
    assert "there is no project 'nosuch' in domain 'default'; its projects: default" in (
        wrong.stderr
    )
    made = jetyard(admin, "admin", "user", "create", email, "--project", "default", "--json")
    assert made.returncode == 0, made.stderr
    colleague = json.loads(made.stdout)
    assert colleague["projects"] == ["default"] and len(colleague["password"]) >= 16
    assert "shown this once" not in made.stdout  # the JSON alone on stdout, for scripts

    mine = login(tmp_path, stack, email, colleague["password"])
    ran = jetyard(mine, "run", TEST_IMAGE, "--cpu", "0.5", "--memory", "64m", "--",
                  "sh", "-c", "echo hello from the colleague; exit 4")  # fmt: skip
    assert ran.returncode == 4, ran.stderr
    assert "hello from the colleague" in ran.stdout

    listed = jetyard(admin, "admin", "user", "list", "--json")
    rows = {row["email"]: row for row in map(json.loads, listed.stdout.splitlines())}
    assert rows[email]["projects"] == ["default"] and rows[email]["keypair"]

    # From the console, signed in with the same password.
    sign_in(page, stack.url, Researcher(email, colleague["user_id"], "", "", colleague["password"]))
    new_session(page, stack.url, "sh -c 'echo the console says hi'")
    status(page, FINAL)
    expect(page.locator("#session-output")).to_contain_text("the console says hi")
    shot(page, "onboarding-colleague-session")

    # Revoked: a clear refusal saying what to do; one new keypair and it works again.
    with Client(stack.url, stack.admin["access_key"], stack.admin["secret_key"]) as jy:
        jy.admin.deactivate_keypair(rows[email]["keypair"], reason="leaked")
    refused = jetyard(mine, "run", TEST_IMAGE, "--", "true")
    assert refused.returncode == 1 and "internal" not in refused.stderr, refused.stderr
    assert "has no active keypair to own sessions" in refused.stderr
    assert "jetyard admin keypair create EMAIL" in refused.stderr
    issued = jetyard(admin, "admin", "keypair", "create", email)
    assert issued.returncode == 0 and "secret key: " in issued.stdout, issued.stderr
    assert jetyard(mine, "run", TEST_IMAGE, "--", "true").returncode == 0


def test_the_people_page_adds_a_person_a_project_and_a_keypair(
    page: Page, stack: Jetyard, tmp_path: Path
) -> None:
    who = stack.admin
    sign_in(page, stack.url, Researcher(who["email"], who["user_id"], "", "", who["password"]))
    page.goto(f"{stack.url}/console/#/operate/people")
    expect(page.locator("#op-add-user")).to_be_visible()
    email = f"console-{stack.port}@example.org"

    page.fill("#op-new-email", email)
    page.select_option("#op-new-project", "default")
    page.click("#op-add-user button[type=submit]")
    password = page.locator("#op-secret dd[data-secret=password]")
    expect(password).to_be_visible()
    secret = password.inner_text()
    expect(page.locator(f"#op-users tr:has-text('{email}')")).to_contain_text("default")
    shot(page, "onboarding-people-added")
    page.click("#op-secret-done")
    expect(password).to_be_hidden()
    assert jetyard(login(tmp_path, stack, email, secret), "ps").returncode == 0

    term = f"term-{stack.port}"
    page.fill("#op-project-name", term)
    page.click("#op-add-project button[type=submit]")
    expect(page.locator("#op-projects")).to_contain_text(term)
    user_id = page.locator(f"#op-users tr:has-text('{email}')").get_attribute("data-user")
    page.select_option("#op-join-user", user_id)
    page.select_option("#op-join-project", label=f"{term} (default)")
    page.click("#op-join button[type=submit]")
    expect(page.locator("#op-people-result")).to_contain_text(f"joined {term}")
    expect(page.locator(f"#op-users tr:has-text('{email}')")).to_contain_text(term)

    page.locator(f"#op-users tr:has-text('{email}') .op-issue-keypair").click()
    access = page.locator("#op-secret dd[data-secret='access key']").inner_text()
    secret_key = page.locator("#op-secret dd[data-secret='secret key']").inner_text()
    shot(page, "onboarding-keypair-issued")
    keyed = user_env(tmp_path / "keyed", JETYARD_ENDPOINT=stack.url)
    signed = jetyard(keyed, "login", "--access-key", access, typed=secret_key + "\n")
    assert signed.returncode == 0 and f"as {user_id} (user" in signed.stdout, signed.stderr

    row = page.locator(f"#op-users tr:has-text('{email}')")
    page.click("#op-secret-done")
    page.on("dialog", lambda dialog: dialog.accept())
    row.locator("text=show keypairs").click()
    revoked = row.locator(f"li:has-text('{access}')")
    revoked.locator(".op-revoke-keypair").click()
    expect(revoked.locator(".tag")).to_have_text("inactive")
    refused = jetyard(keyed, "ps")
    assert refused.returncode == 1 and "deactivated" in refused.stderr, refused.stderr

    page.select_option("#op-change-user", user_id)
    page.select_option("#op-change-role", "monitor")
    page.click("#op-change button[type=submit]")
    expect(row.locator("td").nth(1)).to_have_text("monitor")

    page.fill("#op-policy-name", f"small-{stack.port}")
    page.fill("#op-policy-sessions", "2")
    page.fill("#op-policy-cpu", "1")
    page.click("#op-add-policy button[type=submit]")
    expect(page.locator(f"#op-policies tr:has-text('small-{stack.port}')")).to_contain_text(
        "sessions at once: 2"
    )
    page.fill("#op-policy-name", f"small-{stack.port}")  # and changed
    page.fill("#op-policy-sessions", "3")
    page.check("#op-policy-change")
    page.click("#op-add-policy button[type=submit]")
    expect(page.locator(f"#op-policies tr:has-text('small-{stack.port}')")).to_contain_text(
        "sessions at once: 3"
    )
    page.fill("#op-group-name", f"class-{stack.port}")
    page.select_option("#op-group-project", label=f"{term} (default)")
    page.click("#op-add-group button[type=submit]")
    expect(page.locator(f"#op-groups tr[data-group='class-{stack.port}']")).to_be_visible()
    expect(page.locator("#op-people-result")).to_contain_text(f"class-{stack.port}")
    read = stack.gql("{ resourceGroups(first: 100) { name projects } }")  # checking, not doing
    (group,) = [g for g in read["data"]["resourceGroups"] if g["name"] == f"class-{stack.port}"]
    assert group["projects"] == [project_id_for("default", term)]
    page.fill("#op-change-group-name", f"class-{stack.port}")
    page.fill("#op-change-group-pids", "256")
    page.select_option("#op-change-group-wait", "true")
    page.click("#op-change-group button[type=submit]")
    expect(page.locator("#op-people-result")).not_to_contain_text("refused")

    def changed() -> bool:
        groups = stack.gql("{ resourceGroups(first: 100) { name pidsLimit waitForLargerNodes } }")
        found = [g for g in groups["data"]["resourceGroups"] if g["name"] == f"class-{stack.port}"]
        return found == [
            {"name": f"class-{stack.port}", "pidsLimit": 256, "waitForLargerNodes": True}
        ]

    wait_until(changed, "the group changed from the console", 30)
    shot(page, "onboarding-people-changed")

    # A project name that is not there: the form says so, naming the domain's projects.
    page.fill("#op-new-email", f"nobody-{stack.port}@example.org")
    page.evaluate("""() => { const pick = document.querySelector('#op-new-project');
      pick.append(new Option('gone', 'gone')); pick.value = 'gone'; }""")
    page.click("#op-add-user button[type=submit]")
    expect(page.locator("#op-people-result .error-box")).to_contain_text(
        "there is no project 'gone' in domain 'default'"
    )


def test_a_class_is_imported_from_csv_or_nobody_when_a_line_is_wrong(
    stack: Jetyard, tmp_path: Path
) -> None:
    admin = admin_env(tmp_path, stack)
    port = stack.port
    bad = tmp_path / "bad.csv"
    bad.write_text(
        f"email,name,project\nann-{port}@example.org,Ann,default\nbo-{port}@example.org,Bo,nope\n"
    )
    refused = jetyard(admin, "admin", "user", "import", str(bad))
    assert refused.returncode == 2, refused.stderr
    assert "line 3: there is no project 'nope' in domain 'default'" in refused.stderr
    assert "nobody was created" in refused.stderr
    listed = jetyard(admin, "admin", "user", "list", "--json").stdout
    assert f"ann-{port}@" not in listed

    roster = tmp_path / "class.csv"
    roster.write_text(
        f"email,name,project,role\nann-{port}@example.org,Ann,default,\n"
        f"bo-{port}@example.org,Bo,default,user\n"
    )
    imported = jetyard(admin, "admin", "user", "import", str(roster))
    assert imported.returncode == 0, imported.stderr
    rows = list(csv.DictReader(io.StringIO(imported.stdout)))
    assert [(r["email"], r["name"], r["project"], r["role"]) for r in rows] == [
        (f"ann-{port}@example.org", "Ann", "default", "user"),
        (f"bo-{port}@example.org", "Bo", "default", "user"),
    ]
    ann = login(tmp_path, stack, rows[0]["email"], rows[0]["password"])
    ran = jetyard(ann, "run", TEST_IMAGE, "--", "sh", "-c", "echo ann was here")
    assert ran.returncode == 0 and "ann was here" in ran.stdout, ran.stderr
    again = jetyard(admin, "admin", "user", "import", str(roster))
    assert again.returncode == 2 and f"line 2: a user with the email ann-{port}" in again.stderr


def test_the_readmes_add_a_colleague_step_runs_as_written(stack: Jetyard, tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    step = readme[readme.index("Add a colleague:") :]
    script = step[step.index("```bash\n") + 8 : step.index("```\n", step.index("```bash\n") + 8)]
    # The README's venv is ``.venv``; CI installs into a temporary one: run that one's jetyard.
    script = script.replace(".venv/bin/", f"{Path(sys.executable).parent}/")
    env = user_env(tmp_path / "walk", JETYARD_ENDPOINT=stack.url)
    signed = jetyard(env, "login", "--access-key", stack.admin["access_key"],
                     typed=stack.admin["secret_key"] + "\n")  # fmt: skip
    assert signed.returncode == 0, signed.stderr
    walked = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=180)  # fmt: skip
    assert walked.returncode == 0, (walked.stdout, walked.stderr)
    assert "hello from " in walked.stdout and "as " in walked.stdout
