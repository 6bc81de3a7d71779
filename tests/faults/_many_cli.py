"""Runs ``rlf.bin.train`` once per command line in this one process (as ``python -m
rlf.bin.train ...`` would, through absl's ``app.run``), so that a table of mistakes costs one
interpreter start instead of one per case. Reads a JSON list of argument lists on stdin and
writes a JSON list of ``{"returncode", "stdout", "stderr"}`` on stdout."""

import contextlib
import io
import json
import sys


def main() -> None:
    import gin
    from absl import flags

    from rlf.bin import train
    cases = json.loads(sys.stdin.read())
    results = []
    real_stdout = sys.stdout
    for args in cases:
        flags.FLAGS.unparse_flags()
        gin.clear_config()
        sys.argv = ["rlf.bin.train", *args]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                train.run()
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
        results.append({"returncode": code, "stdout": out.getvalue(),
                        "stderr": err.getvalue()})
    real_stdout.write(json.dumps(results))


if __name__ == "__main__":
    main()
