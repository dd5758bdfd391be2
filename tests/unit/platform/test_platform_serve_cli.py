from typer.testing import CliRunner

from services.tools.cli.main import app


def test_serve_reports_a_bad_setting_and_exits_2() -> None:
    result = CliRunner().invoke(app, ["serve", "shoe"], env={"PB_PERSISTENCE": "mongo"})
    assert result.exit_code == 2
    assert "PB_PERSISTENCE" in result.output


def test_serve_knows_the_three_services() -> None:
    result = CliRunner().invoke(app, ["serve", "croupier"])
    assert result.exit_code != 0
    assert "shoe" in result.output
