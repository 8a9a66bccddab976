"""A store DSN is shown (`pinledger config`, a shard map's errors, `replay`'s lines)
without its password, in whichever of libpq's and MySQL's forms the password is
written."""

from __future__ import annotations

import pytest

from pinledger.projections.dsn import passwords, redacted


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        ("postgresql://pin:s3cret@db:5432/x", "postgresql://pin:***@db:5432/x"),
        ("mysql://pin:s3cret@db/x?ssl-mode=REQUIRED", "mysql://pin:***@db/x?ssl-mode=REQUIRED"),
        # libpq takes the password as a URL parameter too, and the key's as sslpassword.
        (
            "postgresql://db/x?sslmode=verify-full&password=s3cret&sslpassword=s3cret",
            "postgresql://db/x?sslmode=verify-full&password=***&sslpassword=***",
        ),
        # libpq's key=value form: plain, quoted with escapes and spaces, unterminated.
        ("host=db password=s3cret user=pin", "host=db password=*** user=pin"),
        ("host=db password = 's3 \\'cret' dbname=x", "host=db password = *** dbname=x"),
        ("host=db PASSWORD='s3 cret", "host=db PASSWORD=***"),
        # Nothing to hide: shown as it is.
        ("postgresql://pin@db/x?sslmode=require", "postgresql://pin@db/x?sslmode=require"),
        ("host=db dbname=x", "host=db dbname=x"),
    ],
)
def test_the_password_is_never_shown(dsn: str, shown: str) -> None:
    assert redacted(dsn) == shown
    assert "s3" not in redacted(dsn)


def test_a_url_that_cannot_be_parsed_is_hidden_whole() -> None:
    assert redacted("postgresql://pin:s3cret@[db/x") == "postgresql://*** (not a valid URL)"


def test_every_password_a_dsn_holds_is_found_as_written_and_decoded() -> None:
    assert sorted(passwords("postgresql://pin:p%40ss@db/x?sslpassword=k3y&sslmode=require")) == [
        "k3y",
        "p%40ss",
        "p@ss",
    ]
    assert sorted(passwords("host=db password='s3 \\'cret' sslpassword=k3y")) == [
        "'s3 \\'cret'",
        "k3y",
        "s3 'cret",
    ]
    assert passwords("mysql://pin@db/x") == passwords("host=db dbname=x") == []
