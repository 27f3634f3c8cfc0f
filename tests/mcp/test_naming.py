from raven.mcp.naming import MAX_NAME_CHARS, model_tool_name


def test_names_are_server_scoped_and_sanitised() -> None:
    assert model_tool_name("notes", "read_note", set()) == "notes__read_note"
    assert model_tool_name("my.server", "do it/now", set()) == "my_server__do_it_now"


def test_long_and_colliding_names_stay_unique_and_short() -> None:
    long = model_tool_name("s", "x" * 100, set())
    assert len(long) <= MAX_NAME_CHARS
    first = model_tool_name("a.b", "t", set())
    second = model_tool_name("a_b", "t", {first})
    assert first != second and len(second) <= MAX_NAME_CHARS
