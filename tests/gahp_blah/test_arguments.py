import pytest
from hypothesis import given
from hypothesis import strategies as st

from gahp_blah.arguments import SyntaxProblem, parse_env_v1, parse_env_v2, split_v1, split_v2


def test_v2_arguments():
    assert split_v2("a 'b c' d") == ["a", "b c", "d"]
    assert split_v2("'it''s' '' x") == ["it's", "", "x"]
    assert split_v2("  lead   trail ") == ["lead", "trail"]
    assert split_v2("'a'b'c d'") == ["abc d"]
    assert split_v2('say "hi"') == ["say", '"hi"']
    with pytest.raises(SyntaxProblem):
        split_v2("'open")
    with pytest.raises(SyntaxProblem):  # '' inside quotes is a quote, not the end
        split_v2("x 'it''")


def v2_quote(arg: str) -> str:
    return "'" + arg.replace("'", "''") + "'"


@given(st.lists(st.text(alphabet=st.characters(exclude_characters="\x00"))))
def test_v2_round_trip(args):
    assert split_v2(" ".join(v2_quote(a) for a in args)) == args


def test_v1_and_env():
    assert split_v1(" a  b\tc ") == ["a", "b", "c"]
    assert parse_env_v1("A=1;B=x y;C=") == {"A": "1", "B": "x y", "C": ""}
    assert parse_env_v2("A=1 'B=x y' C='it''s'") == {"A": "1", "B": "x y", "C": "it's"}
    with pytest.raises(SyntaxProblem):
        parse_env_v1("NOVALUE")
