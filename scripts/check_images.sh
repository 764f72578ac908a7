#!/usr/bin/env bash
# Builds deploy/'s images and checks that they run:
#   rl:cpu         trains ppo_cartpole to 475+ with its run folder on a mounted volume, then a
#                  second container resumes that run from the volume (--train_steps 120000);
#   rl:env-server  serves CartPole with a token to a train.py outside it (and refuses a wrong
#                  token), and stops cleanly on `docker stop`;
#   rl:gpu, rl:tpu the builds; TensorFlow importing in rl:gpu (no GPU here to run on), and
#                  rl:tpu's TensorFlow and libtpu packages (importing them needs a TPU host).
# Each image is built twice more after its first build: from a copy of the context with one
# comment added to rl/ (a code-only change: the "warm" time), then from the checkout again.
# The table at the end gives each image's size and build times.
#   bash scripts/check_images.sh            # as the build cache stands
#   bash scripts/check_images.sh --cold     # empty the build cache first: cold build times
#   bash scripts/check_images.sh --no-gpu   # skip rl:gpu (its build downloads about 3 GB);
#                                           # --no-tpu likewise
# Environment: PYTHON, the interpreter with rl's requirements for the learner outside the
# containers (default: python); CHECK_LOG_DIR, where build and run logs go (default: a
# temporary folder, printed). On a machine without an image registry, scripts/docker_base.sh
# (run first, by this script) starts the daemon and makes the python:3.11-slim base.
# Exit codes: 0 every check passed (skipped ones say why); 1 a build or check failed;
# 2 a bad argument; 3 no Docker daemon could be reached or started.
set -uo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

cold=0
declare -A skip
for arg in "$@"; do
    case "$arg" in
        --cold) cold=1 ;;
        --no-gpu) skip[gpu]=1 ;;
        --no-tpu) skip[tpu]=1 ;;
        *) echo "check_images.sh: unknown argument $arg (known: --cold, --no-gpu, --no-tpu)" >&2; exit 2 ;;
    esac
done

python="${PYTHON:-python}"
logs="${CHECK_LOG_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/rl-check-images.XXXXXX")}"
mkdir -p "$logs"
work="$(mktemp -d "${TMPDIR:-/tmp}/rl-check-work.XXXXXX")"
containers=()
cleanup() {
    for id in "${containers[@]}"; do docker rm -f "$id" >/dev/null 2>&1; done
    rm -rf "$work"
}
trap cleanup EXIT

failures=0
declare -A size cold_time warm_time verdict
say() { echo "check_images: $*" >&2; }
fail() { say "FAIL $*"; failures=$((failures + 1)); }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

bash scripts/docker_base.sh || { say "no Docker daemon here: nothing checked"; exit 3; }

# A client whose `docker build` is BuildKit's (the Dockerfiles mount pip's cache).
export DOCKER_BUILDKIT=1
builder="$(bash scripts/buildkit_client.sh)" \
    || { say "no docker client here builds with BuildKit (install buildx)"; exit 3; }
say "builds with $builder ($("$builder" version --format '{{.Client.Version}}' 2>/dev/null)), logs in $logs"

if [ "$cold" = 1 ]; then
    docker rmi -f rl:cpu rl:env-server rl:gpu rl:tpu >/dev/null 2>&1
    "$builder" builder prune -af >/dev/null
fi

# The images this script builds carry this label, so the ones a later build of the same tag
# left untagged can be removed (and no other image).
built_here="rl.check_images=1"

# build TAG DOCKERFILE CONTEXT LOG: one build on the host network; its output goes to LOG.
build() {
    nice -n 10 "$builder" build --network host --progress plain --label "$built_here" \
        -t "$1" -f "$3/$2" "$3" >"$4" 2>&1
}

# build_and_time NAME TAG DOCKERFILE: the first build, the code-only rebuild, and a last build
# from the checkout so the tag holds the checkout's code. 0 when all three built.
build_and_time() {
    local name="$1" tag="$2" dockerfile="$3" start copy
    start="$(now)"
    if ! build "$tag" "$dockerfile" "$root" "$logs/build-$name.log"; then
        fail "$tag did not build (log: $logs/build-$name.log):"
        tail -n 15 "$logs/build-$name.log" >&2
        cold_time[$name]="failed"
        return 1
    fi
    cold_time[$name]="$(since "$start")"
    copy="$work/context-$name"
    mkdir -p "$copy"
    cp -a setup.py README.md train.py rl scripts deploy .dockerignore "$copy/"
    echo "# a code-only change, made by scripts/check_images.sh" >>"$copy/rl/__init__.py"
    start="$(now)"
    build "$tag" "$dockerfile" "$copy" "$logs/build-$name-warm.log" \
        || { fail "$tag: the code-only rebuild failed ($logs/build-$name-warm.log)"; return 1; }
    warm_time[$name]="$(since "$start")"
    build "$tag" "$dockerfile" "$root" "$logs/build-$name-again.log" \
        || { fail "$tag: the rebuild from the checkout failed"; return 1; }
    size[$name]="$(docker image inspect --format '{{.Size}}' "$tag" \
        | awk '{ printf "%.0f MB", $1 / 1e6 }')"
}

# run_check NAME DESCRIPTION COMMAND...: runs a check function, records pass or fail.
run_check() {
    local name="$1" what="$2"
    shift 2
    say "$name: $what"
    if "$@"; then
        verdict[$name]="${verdict[$name]:-}${verdict[$name]:+; }$what: ok"
    else
        verdict[$name]="${verdict[$name]:-}${verdict[$name]:+; }$what: FAILED"
        fail "$name: $what"
    fi
}

# The last line of a file that is a JSON object with a "step": train.py's result line.
result_step() {
    "$python" -c 'import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("{")]
print(json.loads(lines[-1])["step"] if lines else "none")' "$1" 2>/dev/null
}

# The last evaluation's step and mean return in a run folder's eval.jsonl.
last_eval() {
    "$python" -c 'import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(rows[-1]["step"], rows[-1]["return_mean"])' "$1/eval.jsonl" 2>/dev/null
}

# rl:cpu: the run folder is a host folder mounted at /rl/runs; the containers run as this
# user so the files it gets back are its own.
volume="$work/runs"
run_cpu() {
    mkdir -p "$volume"
    docker run --rm --network host --user "$(id -u):$(id -g)" -e HOME=/tmp \
        -v "$volume:/rl/runs" rl:cpu --hparams ppo_cartpole --seed 0 --output_dir runs/ppo "$@"
}

train_to_475() {
    run_cpu >"$logs/cpu-train.out" 2>"$logs/cpu-train.err" \
        || { tail -n 5 "$logs/cpu-train.err" >&2; return 1; }
    local step mean
    read -r step mean <<<"$(last_eval "$volume/ppo")"
    say "  first container: final step $(result_step "$logs/cpu-train.out"), last evaluation at $step: return $mean"
    awk -v m="${mean:-0}" 'BEGIN { exit !(m >= 475) }'
}

resume_in_a_second_container() {
    run_cpu --train_steps 120000 >"$logs/cpu-resume.out" 2>"$logs/cpu-resume.err" \
        || { tail -n 5 "$logs/cpu-resume.err" >&2; return 1; }
    local final starts step mean
    final="$(result_step "$logs/cpu-resume.out")"
    starts="$(wc -l <"$volume/ppo/snapshot/resumes.jsonl")"
    read -r step mean <<<"$(last_eval "$volume/ppo")"
    say "  second container: final step $final, starts recorded $starts, last evaluation at $step: return $mean"
    grep -q "resuming from runs/ppo/checkpoints/ckpt-100000" "$logs/cpu-resume.err" \
        && [ "$final" = 120000 ] && [ "$starts" -ge 2 ] && [ "$step" = 120000 ]
}

# KubeRay starts `ray start` through `bash -l`, whose /etc/profile resets PATH.
login_shell_finds_ray() {
    docker run --rm --entrypoint bash "$1" -lc 'command -v ray' | grep -qx /venv/bin/ray
}

no_compiler_in() {
    docker run --rm --entrypoint sh "$1" -c '! command -v gcc && ! command -v cc && ! command -v swig' >/dev/null
}

# rl:env-server: port 0 (any free one: the host network is shared), read from its serving line.
server_port=""
start_env_server() {
    local id
    id="$(docker run -d --network host -e RL_ENV_SERVER_TOKEN="$token" rl:env-server \
        --env CartPole-v1 --port 0)" || return 1
    containers+=("$id")
    server="$id"
    local deadline=$((SECONDS + 120))
    while [ $SECONDS -lt $deadline ]; do
        server_port="$(docker logs "$id" 2>/dev/null | sed -n 's/^serving .* on grpc:\/\/[^:]*:\([0-9]*\) (token required)$/\1/p')"
        [ -n "$server_port" ] && { say "  serving on port $server_port"; return 0; }
        [ "$(docker inspect --format '{{.State.Running}}' "$id")" = true ] || break
        sleep 0.5
    done
    docker logs "$id" 2>&1 | tail -n 5 >&2
    return 1
}

learner_outside_trains() {
    RL_ENV_SERVER_TOKEN="$token" "$python" train.py --hparams ppo_cartpole --seed 0 \
        --env "grpc://127.0.0.1:$server_port/CartPole-v1" --train_steps 800 \
        --output_dir "$work/remote" >"$logs/remote.out" 2>"$logs/remote.err" \
        || { tail -n 5 "$logs/remote.err" >&2; return 1; }
    [ "$(result_step "$logs/remote.out")" = 800 ]
}

wrong_token_refused() {
    # The check must fail, and say so in one line that names the token.
    if RL_ENV_SERVER_TOKEN="not-$token" "$python" -m rl.envs.check \
        "grpc://127.0.0.1:$server_port/CartPole-v1" >"$logs/wrong-token.out" 2>"$logs/wrong-token.err"; then
        return 1
    fi
    say "  wrong token: $(tail -n 1 "$logs/wrong-token.err")"
    grep -qi token "$logs/wrong-token.err"
}

stops_cleanly() {
    docker stop -t 20 "$server" >/dev/null || return 1
    [ "$(docker inspect --format '{{.State.ExitCode}}' "$server")" = 0 ]
}

no_tensorflow_in_env_server() {
    docker run --rm --entrypoint python rl:env-server -c \
        'import importlib.util, sys; sys.exit(importlib.util.find_spec("tensorflow") is not None)'
}

tensorflow_imports_in() {
    local said
    said="$(docker run --rm --entrypoint python "$1" -c \
        'import tensorflow as tf; print(tf.__version__, len(tf.config.list_physical_devices("GPU")), "GPUs")' \
        2>"$logs/import-${1#rl:}.err")" || { tail -n 5 "$logs/import-${1#rl:}.err" >&2; return 1; }
    say "  TensorFlow in $1: $said"
}

# TensorFlow's TPU build loads libtpu when imported, which wants a TPU host (here libtpu 0.0.52,
# what tensorflow-tpu 2.20's libtpu~=0.0.14 resolves to, aborts the import; 0.0.14 hangs).
# Off a TPU host: the packages and their versions only.
tpu_packages_in() {
    local said
    said="$(docker run --rm --entrypoint python "$1" -c 'import importlib.metadata as m
print(*(p + " " + m.version(p) for p in ("tensorflow-tpu", "libtpu", "ray")), sep=", ")' \
        2>"$logs/import-tpu.err")" || { tail -n 5 "$logs/import-tpu.err" >&2; return 1; }
    say "  in $1: $said"
}

# --- rl:env-server first: the smallest and quickest.
if build_and_time env-server rl:env-server deploy/env-server/Dockerfile; then
    token="$("$python" -c 'import secrets; print(secrets.token_hex(32))')"
    run_check env-server "no TensorFlow" no_tensorflow_in_env_server
    if run_check env-server "starts with a token" start_env_server && [ -n "$server_port" ]; then
        run_check env-server "a train.py outside trains on it" learner_outside_trains
        run_check env-server "a wrong token is refused" wrong_token_refused
        run_check env-server "docker stop: exit 0" stops_cleanly
    fi
fi

# --- rl:cpu
if build_and_time cpu rl:cpu deploy/Dockerfile; then
    run_check cpu "no compiler" no_compiler_in rl:cpu
    run_check cpu "bash -l finds ray" login_shell_finds_ray rl:cpu
    if run_check cpu "ppo_cartpole to 475+ on a volume" train_to_475; then
        run_check cpu "resumed in a second container" resume_in_a_second_container
    fi
fi

# --- rl:gpu and rl:tpu: built and checked without the accelerator to run on.
# A base image other than the python one cannot be pulled here (no registry): skipped.
for name in gpu tpu; do
    if [ "${skip[$name]:-0}" = 1 ]; then
        verdict[$name]="skipped: --no-$name"
        continue
    fi
    base="$(sed -n 's/^FROM \([^ ]*\).*/\1/p' "deploy/Dockerfile.$name" | head -n 1)"
    if ! docker image inspect "$base" >/dev/null 2>&1; then
        verdict[$name]="skipped: its base $base is not here and no registry is reachable"
    elif build_and_time "$name" "rl:$name" "deploy/Dockerfile.$name"; then
        run_check "$name" "no compiler" no_compiler_in "rl:$name"
        run_check "$name" "bash -l finds ray" login_shell_finds_ray "rl:$name"
        if [ "$name" = gpu ]; then
            run_check gpu "TensorFlow imports (no GPU here)" tensorflow_imports_in rl:gpu
        else
            run_check tpu "tensorflow-tpu and libtpu installed" tpu_packages_in rl:tpu
        fi
    fi
done

docker image prune -f --filter "label=$built_here" >/dev/null

cache_state="as cached"
[ "$cold" = 1 ] && cache_state="cold"
echo
printf '%-15s %-9s %-18s %-19s %s\n' image size "build ($cache_state)" "code-only rebuild" checks
for name in env-server cpu gpu tpu; do
    printf '%-15s %-9s %-18s %-19s %s\n' "rl:$name" "${size[$name]:--}" "${cold_time[$name]:--}" \
        "${warm_time[$name]:--}" "${verdict[$name]:--}"
done
if [ "$failures" -gt 0 ]; then
    echo "$failures checks failed; logs in $logs"
    exit 1
fi
echo "every check passed; logs in $logs"
