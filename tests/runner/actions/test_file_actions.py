"""The file actions: what they do, and what they refuse (with the message the agent sees)."""

import os

from runner.execution.sandboxes import sandbox_config


def run_script(env, source: str, name: str = "attempt.py"):
    (env.workspace / name).write_text(source)
    os.chown(env.workspace / name, *(sandbox_config().ids or (os.getuid(), os.getgid())))
    return env.execute("Execute Script", {"script_name": name})


def test_list_files_shows_files_and_folders(make_env):
    env = make_env({"train.py": "", "data/a.csv": ""})
    assert env.execute("List Files", {"dir_path": "."}).observation == "data/\ntrain.py\n"


def test_read_write_append_round_trip(make_env):
    env = make_env()
    assert env.execute("Write File", {"file_name": "notes.txt", "content": "a"}).observation == (
        "File notes.txt written successfully."
    )
    env.execute("Append File", {"file_name": "notes.txt", "content": "b"})
    assert env.execute("Read File", {"file_name": "notes.txt"}).observation == "ab"


def test_copy_and_undo_restore_the_previous_version(make_env):
    env = make_env({"train.py": "v1"})
    env.execute("Write File", {"file_name": "train.py", "content": "v2"})
    env.execute("Copy File", {"source": "train.py", "destination": "copy.py"})
    assert (env.workspace / "copy.py").read_text() == "v2"

    outcome = env.execute("Undo Edit Script", {"script_name": "train.py"})

    assert (env.workspace / "train.py").read_text() == "v1"
    assert outcome.observation.endswith("v1")
    assert env.execute("Undo Edit Script", {"script_name": "train.py"}).observation == (
        "EnvError: There is no change to undo."
    )


def test_inspect_script_lines(make_env):
    env = make_env({"s.py": "\n".join(f"line {i}" for i in range(1, 201))})
    outcome = env.execute(
        "Inspect Script Lines", {"script_name": "s.py", "start_line_number": "3", "end_line_number": 4}
    )
    assert outcome.observation.endswith("line 3\nline 4")
    too_many = env.execute(
        "Inspect Script Lines", {"script_name": "s.py", "start_line_number": 1, "end_line_number": 150}
    )
    assert "limited to 100 lines" in too_many.observation


def test_paths_outside_the_workspace_are_refused(make_env, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("hidden")
    env = make_env()
    os.symlink(secret, env.workspace / "link.txt")

    for name in ["../secret.txt", str(secret), "link.txt", "a/../../secret.txt"]:
        outcome = env.execute("Read File", {"file_name": name})
        assert outcome.error, name
        assert "not in the work directory" in outcome.observation, name
        assert "hidden" not in outcome.observation


def test_read_only_files_cannot_be_written_appended_copied_over_or_undone(make_env):
    env = make_env({"data.csv": "x", "other.txt": "y"}, read_only_patterns=["data.csv"])
    attempts = [
        ("Write File", {"file_name": "data.csv", "content": "z"}),
        ("Append File", {"file_name": "data.csv", "content": "z"}),
        ("Copy File", {"source": "other.txt", "destination": "data.csv"}),
        ("Undo Edit Script", {"script_name": "data.csv"}),
    ]
    for name, args in attempts:
        outcome = env.execute(name, args)
        assert outcome.observation == "EnvError: cannot write file data.csv because it is a read-only file.", name
    assert (env.workspace / "data.csv").read_text() == "x"


def test_bad_input_names_the_problem_and_shows_the_usage(make_env):
    env = make_env()
    missing = env.execute("Read File", {})
    assert "missing file_name" in missing.observation
    assert '"file_name": [a valid file name' in missing.observation
    extra = env.execute("List Files", {"dir_path": ".", "recursive": True})
    assert "unexpected recursive" in extra.observation
    wrong_type = env.execute("Read File", {"file_name": 3})
    assert "file_name must be a string" in wrong_type.observation
    not_a_dict = env.execute("Read File", "train.py")
    assert "needs to be a valid json" in not_a_dict.observation


def test_each_action_names_its_error(make_env):
    env = make_env({"bin.dat": "", "s.py": "a = 1\n"})
    (env.workspace / "bin.dat").write_bytes(b"\x00\x01binary")
    cases = [
        ("List Files", {"dir_path": "missing"}, "Cannot list file in the missing directory"),
        ("Read File", {"file_name": "missing.txt"}, "EnvError: cannot read file missing.txt"),  # MLAgentBench's words
        ("Read File", {"file_name": "bin.dat"}, "it is a binary file"),
        ("Read File", {"file_name": "."}, "EnvError: cannot read file ."),
        ("Write File", {"file_name": "backup/x.py", "content": ""}, "backup/ folder is kept by the environment"),
        ("Copy File", {"source": "missing.py", "destination": "x.py"}, "Check whether the source and destinations"),
        ("Execute Script", {"script_name": "missing.py"}, "The file missing.py does not exist."),
        ("Inspect Script Lines", {"script_name": "s.py", "start_line_number": 5, "end_line_number": 9}, "out of range"),
        (
            "Inspect Script Lines",
            {"script_name": "s.py", "start_line_number": "x", "end_line_number": 2},
            "start_line_number must be a whole number",
        ),
        ("Final Answer", {}, "missing final_answer"),
    ]
    for name, args, message in cases:
        outcome = env.execute(name, args)
        assert outcome.error, (name, args)
        assert message in outcome.observation, (name, outcome.observation)


def test_a_file_too_large_to_read_is_refused_with_advice(make_env):
    env = make_env()
    (env.workspace / "big.csv").write_text("x" * (6 * 1024 * 1024))
    outcome = env.execute("Read File", {"file_name": "big.csv"})
    assert "over the 5242880 byte limit" in outcome.observation and "Inspect Script Lines" in outcome.observation


def test_long_script_output_keeps_its_head_and_tail_and_says_what_was_cut(make_env):
    env = make_env({"long.py": "for i in range(20000):\n    print('line', i)\n"}, observation_limit=2000)
    outcome = env.execute("Execute Script", {"script_name": "long.py"})
    assert "line 0\n" in outcome.observation and "line 19999" in outcome.observation
    printed = sum(len(f"line {i}\n") for i in range(20000))
    # Cut once, while streaming, by exactly what was not kept (1000 bytes of head and of tail).
    assert outcome.observation.count("of output cut here") == 1
    assert f"[... {printed - 2000} bytes of output cut here" in outcome.observation
    assert outcome.detail["output_bytes"] == printed
    assert len(outcome.observation) < 3000


def test_a_failing_script_reports_its_exit_code_and_error_output(make_env):
    bad = "import sys\nprint('to stderr', file=sys.stderr)\nsys.exit(3)\n"
    env = make_env({"ok.py": "print('fine')\n", "bad.py": bad})
    ok = env.execute("Execute Script", {"script_name": "ok.py"})
    assert not ok.error and "fine" in ok.observation and ok.detail["exit_code"] == 0
    bad = env.execute("Execute Script", {"script_name": "bad.py"})
    assert bad.error and bad.detail["exit_code"] == 3
    assert "to stderr" in bad.observation and "(The script exited with code 3.)" in bad.observation


def test_a_backup_link_planted_by_a_script_does_not_reach_outside(make_env, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "answer_key.csv").write_text("TOP SECRET")
    env = make_env()
    run_script(env, f"import os\nos.symlink({str(outside)!r}, 'backup')")
    assert (env.workspace / "backup").is_symlink()

    first = env.execute("Write File", {"file_name": "answer", "content": "x"})
    second = env.execute("Write File", {"file_name": "answer", "content": "y"})
    undo = env.execute("Undo Edit Script", {"script_name": "answer"})

    assert "TOP SECRET" not in first.observation + second.observation + undo.observation
    assert (outside / "answer_key.csv").read_text() == "TOP SECRET"
    assert sorted(p.name for p in outside.iterdir()) == ["answer_key.csv"]


def test_copy_file_onto_a_folder_holding_a_read_only_file_is_refused(make_env):
    env = make_env({"data/train.csv": "original", "train.csv": "poison"}, read_only_files=["data/train.csv"])
    outcome = env.execute("Copy File", {"source": "train.csv", "destination": "data"})
    assert outcome.error and "destination is a folder" in outcome.observation
    assert (env.workspace / "data" / "train.csv").read_text() == "original"


def test_write_file_onto_a_fifo_is_refused_at_once(make_env):
    env = make_env()
    run_script(env, "import os\nos.mkfifo('pipe')")
    outcome = env.execute("Write File", {"file_name": "pipe", "content": "x"})  # a hang is pytest's timeout
    copied = env.execute("Copy File", {"source": "pipe", "destination": "copy"})
    assert outcome.error and "special file" in outcome.observation
    assert copied.error


def test_bad_names_and_contents_are_observations_not_crashes(make_env):
    env = make_env()
    for args in (
        {"file_name": "a\ud800b", "content": "x"},
        {"file_name": "a\0b", "content": "x"},
        {"file_name": "x" * 300, "content": "x"},
        {"file_name": "ok.txt", "content": "bad \ud800 surrogate"},
    ):
        outcome = env.execute("Write File", args)
        assert outcome.error and outcome.observation.startswith("EnvError"), args


def test_a_swapped_link_never_lets_read_file_reach_outside(make_env, tmp_path):
    outside = tmp_path / "host"
    outside.mkdir()
    (outside / "f").write_text("HOST SECRET")
    env = make_env({"d/f": "inside"})
    try:
        env.execute(
            "Python REPL",
            {
                "command": f"""import os, threading
def swap():
    while True:
        try:
            os.rename("d", "d_real"); os.symlink({str(outside)!r}, "d"); os.unlink("d"); os.rename("d_real", "d")
        except OSError:
            pass
threading.Thread(target=swap, daemon=True).start()"""
            },
        )
        seen = [env.execute("Read File", {"file_name": "d/f"}).observation for _ in range(200)]
        snapshots = [env.workspace_size_mb() for _ in range(20)]
    finally:
        env.close()
    assert not any("HOST SECRET" in s for s in seen)
    assert any(s == "inside" for s in seen)
    assert all(size < 1 for size in snapshots)
