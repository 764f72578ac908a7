#!/usr/bin/env bash
# A three-node Ray cluster of rl:cpu containers on this machine, and a run that loses a node:
#   1. a head and two worker containers on the host network, each `ray start`ed as its node
#      with its own ports, token authentication on (RAY_AUTH_MODE=token and one token for all);
#      the head offers Ray no CPUs, so the actors go to the workers (as the KubeRay manifests
#      have it);
#   2. the learner, in the head container (Ray refuses a driver on another Python patch
#      release than the cluster's), trains ppo_cartpole with --sys ray --num_workers 4; the
#      script shows where each actor runs (Ray's actor table: node and container) and checks
#      that both worker nodes hold actors;
#   3. once the run's first checkpoint is written, `docker kill` stops one worker container:
#      its actors must come back on the surviving worker and the run reach 475+;
#   4. the same run folder, rerun with --train_steps 120000, resumes from its last checkpoint;
#   5. a new worker node joins; a run with --worker_restarts 1 loses that node after its first
#      checkpoint and stops with exit 4 and one line; rerun, it resumes from that checkpoint
#      on the one worker left and ends at 100000 steps.
#   6. python -m rl.search --sys ray (2 trials) and python -m rl.tournament --sys ray (4
#      scripted tic-tac-toe players) on the same cluster.
#   A driver without the cluster's token is refused first, in one line.
#   bash scripts/check_cluster.sh
# Environment: CHECK_LOG_DIR, where logs and the run folder go (default: a temporary folder,
# printed); RAY_PORT_BASE, the first of the ports the nodes use (default 36000: the head's
# GCS port; the nodes take the 600 ports above it). Every container is removed at the end,
# on failure too.
# Exit codes: 0 every check passed; 1 a check failed; 2 a bad argument; 3 no Docker daemon
# could be reached or started, or rl:cpu could not be built.
set -uo pipefail
cd "$(dirname "$0")/.."

for arg in "$@"; do
    echo "check_cluster.sh: unknown argument $arg (it takes none)" >&2
    exit 2
done

logs="${CHECK_LOG_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/rl-check-cluster.XXXXXX")}"
mkdir -p "$logs/runs"
runs="$(cd "$logs/runs" && pwd)"
prefix="rl-cluster-$$"
containers=()
learner=""
cleanup() {
    [ -n "$learner" ] && kill "$learner" 2>/dev/null
    for name in "${containers[@]}"; do docker rm -f "$name" >/dev/null 2>&1; done
}
trap cleanup EXIT
trap 'exit 1' INT TERM

failures=0
say() { echo "check_cluster: $*" >&2; }
fail() { say "FAIL $*"; failures=$((failures + 1)); }
started=$SECONDS
elapsed() { echo "$((SECONDS - started)) s"; }

# The daemon, and the stand-in python:3.11-slim where no registry is reachable.
bash scripts/docker_base.sh || { say "no Docker daemon here: nothing checked"; exit 3; }
# rl:cpu from this checkout (seconds when only the code changed; minutes from cold).
client="$(bash scripts/buildkit_client.sh)" || { say "no docker client here builds with BuildKit"; exit 3; }
DOCKER_BUILDKIT=1 nice -n 10 "$client" build --network host -t rl:cpu -f deploy/Dockerfile . \
    >"$logs/build.log" 2>&1 || { say "rl:cpu did not build ($logs/build.log)"; exit 3; }

# Ray advertises this machine's interface address (not loopback) for every node.
ip="$(hostname -I | awk '{ print $1 }')"
base="${RAY_PORT_BASE:-36000}"
address="$ip:$base"
token="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
say "logs and the run folder in $logs; the cluster at $address"

# node NAME INDEX RAY-START-ARGS...: one container, one Ray node with ports of its own (all
# share the host's network). The run folder is mounted on every node, as a ReadWriteMany
# volume would be; the containers run as this user so the files they write are its own.
node() {
    local name="$prefix-$1" i="$2" p
    shift 2
    p=$((base + 10 + 10 * i))
    containers+=("$name")
    docker run -d --name "$name" --network host --shm-size 1g \
        --user "$(id -u):$(id -g)" -e HOME=/tmp \
        -e RAY_AUTH_MODE=token -e RAY_AUTH_TOKEN="$token" \
        -v "$runs:/rl/runs" --entrypoint nice rl:cpu -n 10 \
        ray start --block --node-ip-address "$ip" \
        --node-manager-port $((p + 1)) --object-manager-port $((p + 2)) \
        --runtime-env-agent-port $((p + 3)) --dashboard-agent-grpc-port $((p + 4)) \
        --dashboard-agent-listen-port $((p + 5)) --metrics-export-port $((p + 6)) \
        --min-worker-port $((base + 100 + 100 * i)) --max-worker-port $((base + 199 + 100 * i)) \
        "$@" >/dev/null
}

# in_head PYTHON-SOURCE: a short Ray driver in the head container (same image, same Python),
# with the cluster's token from the container's environment.
in_head() {
    docker exec "$prefix-head" python -c "
import json, ray
ray.init(address='$address', logging_level='ERROR', log_to_driver=False)
manager_ports = {$((base + 21)): 'head', $((base + 31)): 'worker1', $((base + 41)): 'worker2', $((base + 51)): 'worker3'}
$1" 2>>"$logs/in-head.err"
}

alive_nodes() {
    in_head "print(sum(n['Alive'] for n in ray.nodes()))"
}

# One line per live actor of the run: its actor id, the node's id and the container it is in
# (the nodes share an IP address; their node-manager ports tell them apart).
actor_places() {
    in_head "
from ray._private.state import actors
nodes = {n['NodeID']: manager_ports.get(n['NodeManagerPort'], '?') for n in ray.nodes()}
for actor_id, a in actors().items():
    if a['State'] == 'ALIVE' and a['ActorClassName'].endswith('_ActorProcess'):
        node_id = a['Address']['NodeID']
        print(actor_id[:12], 'node', node_id[:12], nodes.get(node_id, '?'), 'pid', a['Pid'])"
}

# wait_until DESCRIPTION SECONDS COMMAND...: polls COMMAND until it succeeds or time is up.
wait_until() {
    local what="$1" seconds="$2" deadline=$((SECONDS + $2))
    shift 2
    until "$@"; do
        if [ $SECONDS -ge $deadline ]; then
            fail "$what: not within $seconds s"
            return 1
        fi
        if [ -n "$learner" ] && ! kill -0 "$learner" 2>/dev/null; then
            fail "$what: the learner ended first"
            return 1
        fi
        sleep 1
    done
}

three_nodes() { [ "$(alive_nodes)" = 3 ]; }

# actors_on COUNT CONTAINERS-REGEX: COUNT live actors, on exactly the containers named.
actors_on() {
    local places
    places="$(actor_places)" || return 1
    echo "$places" >"$logs/places.txt"
    [ "$(grep -c . <<<"$places")" = "$1" ] \
        && [ "$(awk '{ print $4 }' <<<"$places" | sort -u | paste -sd' ')" = "$2" ]
}

# The last line of a file that is a JSON object with a "step": train.py's result line.
result_step() {
    python3 -c 'import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("{")]
print(json.loads(lines[-1])["step"] if lines else "none")' "$1" 2>/dev/null
}

last_eval() {
    python3 -c 'import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(rows[-1]["step"], rows[-1]["return_mean"])' "$1/eval.jsonl" 2>/dev/null
}

# learn NAME RUN TRAIN.PY-ARGS...: the learner in the head container, in the background,
# its run folder runs/RUN.
learn() {
    local name="$1" run="$2"
    shift 2
    docker exec "$prefix-head" nice -n 5 python train.py --sys ray --ray_address "$address" \
        --num_workers 4 --hparams ppo_cartpole --seed 0 --output_dir "runs/$run" "$@" \
        >"$logs/$name.out" 2>"$logs/$name.err" &
    learner=$!
}

# finish NAME SECONDS: waits for the learner; its exit code.
finish() {
    local deadline=$((SECONDS + $2)) rc
    while kill -0 "$learner" 2>/dev/null; do
        if [ $SECONDS -ge $deadline ]; then
            fail "$1: the learner did not end within $2 s"
            return 1
        fi
        sleep 2
    done
    wait "$learner"
    rc=$?
    learner=""
    return $rc
}

# checkpoint_written RUN: the run's first checkpoint is on the volume.
checkpoint_written() { ls "$runs/$1/checkpoints"/ckpt-50000.index >/dev/null 2>&1; }

# A driver without the cluster's token is refused, in train.py's one line (two tries of
# Ray's, not twenty).
refused_without_token() {
    docker exec "$prefix-head" env -u RAY_AUTH_MODE -u RAY_AUTH_TOKEN RAY_NUM_REDIS_GET_RETRIES=2 \
        python train.py --sys ray --ray_address "$address" --num_workers 4 --hparams ppo_cartpole \
        --output_dir runs/refused >/dev/null 2>"$logs/refused.err"
    local rc=$?
    say "  without the token: exit $rc, $(cat "$logs/refused.err")"
    [ "$rc" = 2 ] && [ "$(wc -l <"$logs/refused.err")" = 1 ] \
        && grep -q "it uses token authentication" "$logs/refused.err" && [ ! -e "$runs/refused" ]
}

# --- 1. the cluster
if (exec 3<>"/dev/tcp/$ip/$base") 2>/dev/null; then
    say "something listens at $address already (another cluster?): set RAY_PORT_BASE"
    exit 1
fi
node head 1 --head --port "$base" --num-cpus 0 --include-dashboard=false \
    --ray-client-server-port $((base + 1)) || { fail "the head did not start"; exit 1; }
wait_until "the head answers" 120 docker exec "$prefix-head" ray status --address "$address" \
    >/dev/null 2>&1 || exit 1
# Four logical CPUs a worker: each holds two of the four actors, and the survivor all four.
for i in 1 2; do
    node "worker$i" $((i + 1)) --address "$address" --num-cpus 4 || fail "worker$i did not start"
done
wait_until "three nodes alive" 180 three_nodes || exit 1
say "three nodes alive after $(elapsed)"
refused_without_token || fail "a driver without the token was not refused in one line"

# --- 2. the learner, its actors on both workers
learn train ppo
if wait_until "four actors on both workers" 300 actors_on 4 "worker1 worker2"; then
    say "where each actor runs ($(elapsed)):"
    sed 's/^/  /' "$logs/places.txt" >&2
fi

# --- 3. a worker node lost mid-run
if wait_until "the first checkpoint" 900 checkpoint_written ppo; then
    docker kill "$prefix-worker2" >/dev/null
    say "docker kill worker2 after the checkpoint at 50000 ($(elapsed))"
    if wait_until "the four actors back on worker1" 300 actors_on 4 "worker1"; then
        say "after the loss ($(elapsed)):"
        sed 's/^/  /' "$logs/places.txt" >&2
    fi
fi
if finish train 1800; then
    read -r step mean <<<"$(last_eval "$runs/ppo")"
    say "the run ended at step $(result_step "$logs/train.out") ($(elapsed)); last evaluation at $step: return $mean"
    awk -v m="${mean:-0}" 'BEGIN { exit !(m >= 475) }' || fail "the run did not reach 475"
else
    fail "the learner failed after the node loss ($logs/train.err):"
    tail -n 5 "$logs/train.err" >&2
fi
grep -i "restart" "$logs/train.err" | tail -n 4 | sed 's/^/  learner: /' >&2

# --- 4. rerun: it resumes from the run folder's last checkpoint
learn resume ppo --train_steps 120000
if finish resume 900; then
    final="$(result_step "$logs/resume.out")"
    say "rerun: $(grep -m 1 "resuming from" "$logs/resume.err"); final step $final ($(elapsed))"
    grep -q "resuming from runs/ppo/checkpoints/ckpt-100000" "$logs/resume.err" \
        && [ "$final" = 120000 ] || fail "the rerun did not resume to 120000"
else
    fail "the rerun failed ($logs/resume.err):"
    tail -n 5 "$logs/resume.err" >&2
fi

# --- 5. a node lost with no restarts to spare: exit 4 in one line, and the rerun resumes.
# A new worker node joins first (as KubeRay would replace the lost pod).
node worker3 4 --address "$address" --num-cpus 4 || fail "worker3 did not start"
wait_until "worker3 alive (three nodes: head, worker1, worker3)" 180 three_nodes
learn spent lost --worker_restarts 1
if wait_until "four actors on worker1 and worker3" 300 actors_on 4 "worker1 worker3" \
    && wait_until "the first checkpoint of runs/lost" 900 checkpoint_written lost; then
    say "where each actor runs:"
    sed 's/^/  /' "$logs/places.txt" >&2
    docker kill "$prefix-worker3" >/dev/null
    say "docker kill worker3 after the checkpoint at 50000 of a run with --worker_restarts 1 ($(elapsed))"
fi
finish spent 900
rc=$?
say "  exit $rc: $(tail -n 1 "$logs/spent.err")"
[ "$rc" = 4 ] && grep -q "(--worker_restarts)" "$logs/spent.err" \
    && [ "$(grep -c "^train.py: stopped" "$logs/spent.err")" = 1 ] \
    || fail "the run did not stop with exit 4 and one line"
learn respent lost
if finish respent 900; then
    read -r step mean <<<"$(last_eval "$runs/lost")"
    say "rerun on worker1 alone: $(grep -m 1 "resuming from" "$logs/respent.err"); final step $(result_step "$logs/respent.out"), last evaluation at $step: return $mean ($(elapsed))"
    grep -q "resuming from runs/lost/checkpoints/ckpt-50000" "$logs/respent.err" \
        && [ "$(result_step "$logs/respent.out")" = 100000 ] || fail "the rerun did not resume from ckpt-50000"
else
    fail "the rerun of runs/lost failed ($logs/respent.err):"
    tail -n 5 "$logs/respent.err" >&2
fi

# --- 6. rl.search and rl.tournament on the cluster (RAY_ADDRESS): their trials and games
# ask Ray for a CPU each, which only the worker left has.
in_head_with_address() {
    docker exec -e RAY_ADDRESS="$address" "$prefix-head" nice -n 5 "$@"
}
if in_head_with_address python -m rl.search --sys ray --hparams ppo_cartpole --space ppo_basic \
    --trials 2 --parallel 2 --train_steps 4000 --pruner none --output_dir runs/search \
    >"$logs/search.out" 2>"$logs/search.err"; then
    say "rl.search --sys ray: 2 trials done ($(elapsed)); where they ran:"
    in_head "
from ray._private.state import actors
nodes = {n['NodeID']: manager_ports.get(n['NodeManagerPort'], '?') for n in ray.nodes()}
for actor_id, a in actors().items():
    if a['ActorClassName'].endswith('TrialProcess'):
        print('  trial actor', actor_id[:12], nodes.get(a['Address']['NodeID'], '?'), a['State'])" >&2
else
    fail "rl.search --sys ray failed ($logs/search.err):"
    tail -n 5 "$logs/search.err" >&2
fi
if in_head_with_address python -m rl.tournament --sys ray --num_workers 4 --game tictactoe \
    --players random first_legal one_step_lookahead perfect --games 20 \
    --output_dir runs/tournament >"$logs/tournament.out" 2>"$logs/tournament.err"; then
    say "rl.tournament --sys ray: done ($(elapsed)):"
    sed 's/^/  /' "$logs/tournament.out" >&2
else
    fail "rl.tournament --sys ray failed ($logs/tournament.err):"
    tail -n 5 "$logs/tournament.err" >&2
fi

if [ "$failures" -gt 0 ]; then
    echo "$failures checks failed; logs in $logs"
    exit 1
fi
echo "every check passed in $(elapsed); logs in $logs"
