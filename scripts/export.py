"""Exports a run's greedy policy as a SavedModel that plain TensorFlow can serve.

    python scripts/export.py runs/ppo_cartpole [--export_dir DIR]

The SavedModel needs no `rl` import:

    policy = tf.saved_model.load(DIR)
    actions = policy(tf.constant(observations, tf.float32))   # [N, *obs] -> [N]
    # or policy.signatures["serving_default"](observations=...)["output_0"]
"""

import argparse
import os
import sys
from typing import List, Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from rl._tf import import_tensorflow_quietly  # noqa: E402
from rl.cli import flag_table  # noqa: E402
from rl.errors import USER_ERRORS  # noqa: E402


def check_export_dir(export_dir: str) -> None:
    """Ends the process (one line, exit 2) unless ``export_dir`` is new and can be written
    (TensorFlow would raise a traceback, after the run was loaded)."""
    from rl.errors import RunConflictError
    from rl.run_folder import check_output_dir

    if os.path.exists(export_dir):
        flag_table.fail(f"{export_dir} exists already; choose another --export_dir")
    try:
        check_output_dir(export_dir, flag="--export_dir")
    except RunConflictError as e:
        flag_table.fail(str(e))


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output_dir", help="a trained run's folder")
    parser.add_argument(
        "--export_dir",
        default=None,
        help="where to write (default OUTPUT_DIR/export/step_<step>); must not exist yet",
    )
    args = parser.parse_args(argv)
    flag_table.PROG = "export.py"
    if not os.path.exists(os.path.join(args.output_dir, "hparams.json")):
        flag_table.fail(f"{args.output_dir} holds no trained run (no hparams.json)")
    if args.export_dir:
        check_export_dir(args.export_dir)  # before loading TensorFlow and the run
    import_tensorflow_quietly()
    from rl import experiment

    try:
        run = experiment.load(args.output_dir)
    except USER_ERRORS as e:
        flag_table.fail(str(e))
    export_dir = args.export_dir or os.path.join(args.output_dir, "export", f"step_{run.step}")
    check_export_dir(export_dir)
    run.agent.policy_module().save(export_dir)
    run.close()
    print(f"exported the greedy policy of {run.restored_from} to {export_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
