def test_the_interpreter_keeps_its_state_between_commands(make_env):
    env = make_env({"data.txt": "41"})
    try:
        assert env.execute("Python REPL", {"command": "x = int(open('data.txt').read())"}).observation == ""
        assert env.execute("Python REPL", {"command": "x + 1"}).observation == "42\n"
        assert env.execute("Python REPL", {"command": "print('printed', x)"}).observation == "printed 41\n"
    finally:
        env.close()


def test_an_exception_is_an_error_observation_and_the_state_survives(make_env):
    env = make_env()
    try:
        env.execute("Python REPL", {"command": "y = 5"})
        failed = env.execute("Python REPL", {"command": "1 / 0"})
        assert failed.error and "ZeroDivisionError" in failed.observation
        assert env.execute("Python REPL", {"command": "y"}).observation == "5\n"
    finally:
        env.close()


def test_the_interpreter_runs_in_the_sandbox(make_env, settings):
    env = make_env()
    project_file = str(settings.BASE_DIR / "manage.py")
    try:
        outcome = env.execute(
            "Python REPL", {"command": f"import os; print(os.getcwd(), os.path.exists({project_file!r}))"}
        )
        assert outcome.observation == "/workspace False\n"
    finally:
        env.close()


def test_a_command_over_the_time_limit_restarts_the_interpreter(make_env):
    env = make_env(action_timeout_s=2)
    try:
        env.execute("Python REPL", {"command": "z = 1"})
        slow = env.execute("Python REPL", {"command": "import time; time.sleep(60)"})
        assert slow.error and "did not finish within 2 s" in slow.observation
        after = env.execute("Python REPL", {"command": "z"})
        assert "NameError" in after.observation  # a new interpreter: earlier variables are gone
    finally:
        env.close()


def test_the_repl_survives_garbage_on_its_channel_and_a_large_command(make_env):
    env = make_env(action_timeout_s=20)
    try:
        garbled = env.execute("Python REPL", {"command": "import os; os.write(3, b'not json\\n')"})
        assert garbled.error and "garbled" in garbled.observation
        big = env.execute("Python REPL", {"command": "x = '" + "a" * 200_000 + "'; print(len(x))"})
        assert big.observation == "200000\n"
    finally:
        env.close()


def test_the_repl_is_held_to_the_workspace_limit(make_env):
    env = make_env(workspace_limit_mb=5, action_timeout_s=60)
    try:
        outcome = env.execute(
            "Python REPL",
            {
                "command": "import time\nfor i in range(100):\n"
                "    open(f'f{i}', 'wb').write(b'x' * 2**20)\n    time.sleep(0.05)"
            },
        )
    finally:
        env.close()
    assert outcome.error and "over its limit of 5 MB" in outcome.observation
