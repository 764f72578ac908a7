"""deploy/env-server/: the env server's image and Kubernetes manifests, checked without a cluster.

As tests/test_deploy.py does for deploy/kuberay: every document of kubernetes.yaml against
Kubernetes' own schemas (kubernetes-validate, strict: unknown fields fail); the container's
arguments through the server's own parser and checks; and the values that must agree across
the Dockerfile, kubernetes.yaml, requirements.txt, setup.py and the README (the port, the
pod labels, the user, the version ranges, the token's variable and Secret, the served envs).
Each agreement check returns its problems, so a test can show that a mismatch is caught.
"""

import ast
import copy
import fnmatch
import json
import os
import re
import shlex
import subprocess
import sys

import kubernetes_validate
import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.join(ROOT, "deploy", "env-server")
SERVE = ["python", "-m", "rl.envs.remote.serve"]
TOKEN_VARIABLE = "RL_ENV_SERVER_TOKEN"


def read(*path):
    with open(os.path.join(*path), encoding="utf-8") as f:
        return f.read()


def kubernetes_version():
    """The version tests/test_deploy.py pins: one cluster runs everything in deploy/."""
    return re.search(
        r'^KUBERNETES_VERSION = "([\d.]+)"', read(ROOT, "tests", "test_deploy.py"), re.M
    ).group(1)


def instructions(text):
    """(INSTRUCTION, argument) of a Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", text)
    return [
        (m[1].upper(), m[2].strip()) for m in re.finditer(r"^\s*([A-Za-z]+)\s+(.+)$", text, re.M)
    ]


def exec_form(dockerfile, name):
    """The JSON-array (exec form) argument of the Dockerfile's only ``name`` instruction."""
    (argument,) = [arg for ins, arg in dockerfile if ins == name]
    return json.loads(argument)


def flag(args, name):
    for i, word in enumerate(args):
        if word == f"--{name}":
            return args[i + 1]
        if word.startswith(f"--{name}="):
            return word.split("=", 1)[1]
    return None


MANIFEST_TEXT = read(HERE, "kubernetes.yaml")
DOCS = [doc for doc in yaml.safe_load_all(MANIFEST_TEXT) if doc]
DOCKERFILE = instructions(read(HERE, "Dockerfile"))
README = read(HERE, "README.md")


def only(docs, kind):
    (doc,) = [d for d in docs if d["kind"] == kind]
    return doc


def server_container(docs):
    (container,) = only(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    return container


def container_port(docs):
    (port,) = server_container(docs)["ports"]
    return port


def served_args(docs, dockerfile):
    """The server's arguments in the pod: the image's ENTRYPOINT after SERVE, then args."""
    entrypoint = exec_form(dockerfile, "ENTRYPOINT")
    assert entrypoint[: len(SERVE)] == SERVE, entrypoint
    container = server_container(docs)
    assert "command" not in container, "the pod must keep the image's ENTRYPOINT"
    return entrypoint[len(SERVE) :] + container["args"]


def wiring_problems(docs, dockerfile):
    """What would stop the Service reaching a served, probed, non-root, token-holding pod."""
    problems = []
    deployment, service = only(docs, "Deployment"), only(docs, "Service")
    pod = deployment["spec"]["template"]
    labels = pod["metadata"].get("labels", {})
    for owner, selector in [
        ("Deployment", deployment["spec"]["selector"]["matchLabels"]),
        ("Service", service["spec"]["selector"]),
    ]:
        if not selector or selector.items() - labels.items():
            problems.append(f"{owner} selector {selector} does not match pod labels {labels}")
    port = container_port(docs)
    number = port["containerPort"]
    (service_port,) = service["spec"]["ports"]
    target = service_port["targetPort"]
    if target not in (number, port.get("name")):
        problems.append(f"Service targetPort {target} is not the container port {number}")
    if service["spec"].get("type", "ClusterIP") != "ClusterIP":
        problems.append(f"Service type {service['spec']['type']}: ClusterIP expected")
    if (service_port.get("name"), service_port.get("appProtocol")) != ("grpc", "grpc"):
        problems.append(f"Service port {service_port}: name and appProtocol grpc expected")
    container = server_container(docs)
    for probe in ("livenessProbe", "readinessProbe"):
        probe_port = container.get(probe, {}).get("grpc", {}).get("port")
        if probe_port != number:
            problems.append(f"{probe} grpc port {probe_port} is not the container port {number}")
    exposed = [int(arg) for ins, arg in dockerfile if ins == "EXPOSE"]
    if exposed != [number]:
        problems.append(f"the Dockerfile EXPOSEs {exposed}, the container port is {number}")
    served = flag(served_args(docs, dockerfile), "port")
    if served != str(number):
        problems.append(f"the server listens on --port {served}, the container port is {number}")
    (user,) = [arg for ins, arg in dockerfile if ins == "USER"]
    security = pod["spec"].get("securityContext", {})
    if security.get("runAsNonRoot") is not True:
        problems.append("the pod's securityContext must set runAsNonRoot: true")
    if str(security.get("runAsUser")) != user.split(":")[0]:
        problems.append(f"runAsUser {security.get('runAsUser')} is not the image's USER {user}")
    env = {e["name"]: e for e in container.get("env", [])}
    if "secretKeyRef" not in env.get(TOKEN_VARIABLE, {}).get("valueFrom", {}):
        problems.append(f"{TOKEN_VARIABLE} must come from a Secret (valueFrom.secretKeyRef)")
    if any(TOKEN_VARIABLE in arg for ins, arg in dockerfile if ins in ("ENV", "ARG")):
        problems.append(f"the Dockerfile sets {TOKEN_VARIABLE}: a token baked into the image")
    return problems


@pytest.mark.unit
def test_each_document_passes_kubernetes_schema():
    assert sorted(doc["kind"] for doc in DOCS) == ["Deployment", "Service"]
    for doc in DOCS:
        kubernetes_validate.validate(doc, kubernetes_version(), strict=True)
    container = {**server_container(DOCS), "imagee": "x"}  # strict: a misspelt field fails
    deployment = copy.deepcopy(only(DOCS, "Deployment"))
    deployment["spec"]["template"]["spec"]["containers"] = [container]
    with pytest.raises(kubernetes_validate.ValidationError, match="imagee"):
        kubernetes_validate.validate(deployment, kubernetes_version(), strict=True)


@pytest.mark.unit
def test_the_service_reaches_the_served_probed_non_root_pods():
    assert wiring_problems(DOCS, DOCKERFILE) == []


def retarget(docs):
    only(docs, "Service")["spec"]["ports"][0]["targetPort"] = 50052


def move_the_liveness_probe(docs):
    server_container(docs)["livenessProbe"]["grpc"]["port"] = 8080


def relabel_the_pods(docs):
    only(docs, "Deployment")["spec"]["template"]["metadata"]["labels"] = {"app": "other"}


def drop_the_security_context(docs):
    del only(docs, "Deployment")["spec"]["template"]["spec"]["securityContext"]


def write_the_token_in(docs):
    server_container(docs)["env"] = [{"name": TOKEN_VARIABLE, "value": "secret"}]


@pytest.mark.unit
@pytest.mark.parametrize(
    "mutate, problem",
    [
        (retarget, "targetPort"),
        (move_the_liveness_probe, "livenessProbe"),
        (relabel_the_pods, "selector"),
        (drop_the_security_context, "runAsNonRoot"),
        (write_the_token_in, "secretKeyRef"),
    ],
    ids=lambda case: getattr(case, "__name__", case),
)
def test_a_mismatch_in_the_manifest_is_caught(mutate, problem):
    docs = copy.deepcopy(DOCS)
    mutate(docs)
    assert any(problem in p for p in wiring_problems(docs, DOCKERFILE))


@pytest.mark.unit
def test_a_mismatch_in_the_dockerfile_is_caught():
    exposed = [(i, "8080" if i == "EXPOSE" else a) for i, a in DOCKERFILE]
    assert any("EXPOSE" in p for p in wiring_problems(DOCS, exposed))
    rooted = [(i, "0" if i == "USER" else a) for i, a in DOCKERFILE]
    assert any("runAsUser" in p for p in wiring_problems(DOCS, rooted))
    baked = [*DOCKERFILE, ("ENV", f"{TOKEN_VARIABLE}=secret")]
    assert any("baked" in p for p in wiring_problems(DOCS, baked))
    moved = [(i, a.replace("50051", "50052") if i == "ENTRYPOINT" else a) for i, a in DOCKERFILE]
    assert any("--port 50052" in p for p in wiring_problems(DOCS, moved))


@pytest.mark.unit
def test_the_image_and_pod_arguments_pass_the_servers_own_parser_and_checks():
    # Needs grpcio (setup.py's remote extra): the serve module imports it.
    from rl.envs.remote import address, serve

    assert address.TOKEN_VARIABLE == TOKEN_VARIABLE  # the variable the client and server read
    entrypoint = exec_form(DOCKERFILE, "ENTRYPOINT")[len(SERVE) :]
    parser = serve.build_parser()
    for where, args in [
        ("ENTRYPOINT + CMD", entrypoint + exec_form(DOCKERFILE, "CMD")),
        ("ENTRYPOINT + the pod's args", served_args(DOCS, DOCKERFILE)),
    ]:
        try:
            parsed = parser.parse_args(args)
        except SystemExit:
            pytest.fail(f"{where}: {shlex.join(args)} is refused by serve's parser")
        assert parsed.host == "0.0.0.0", where  # reachable through the container's port
        assert parsed.port == container_port(DOCS)["containerPort"], where
        assert parsed.token is None, f"{where}: the token must come from {TOKEN_VARIABLE}"
        parsed.token = "from-the-secret"  # what main() reads from RL_ENV_SERVER_TOKEN
        serve.check_args(parsed)  # limits in range, every env id known
    with pytest.raises(SystemExit):  # the parser refuses a misspelt flag
        parser.parse_args([*entrypoint, "--env", "CartPole-v1", "--max_sesions", "4"])


def canonical(name):
    """A distribution or extra name as PEP 503 and PEP 685 compare them."""
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


def requirement(line):
    """(name, extras, specifiers) of a requirement line, names and extras normalised."""
    m = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*(?:\[([^\]]*)\])?\s*(.*?)\s*", line)
    name = canonical(m[1])
    extras = frozenset(canonical(e) for e in (m[2] or "").split(",") if e.strip())
    return name, extras, frozenset(s.replace(" ", "") for s in m[3].split(",") if s.strip())


def setup_requirements(setup_text):
    """setup.py's install_requires and extras_require, read without running it."""
    found = {}
    for node in ast.walk(ast.parse(setup_text)):
        if isinstance(node, ast.keyword) and node.arg in ("install_requires", "extras_require"):
            found[node.arg] = ast.literal_eval(node.value)
    return found["install_requires"], found["extras_require"]


def requirement_problems(requirements_text, setup_text):
    """Where requirements.txt differs from setup.py's remote extra and the packages of
    install_requires that the server imports (numpy, gymnasium)."""
    install, extras = setup_requirements(setup_text)
    if "remote" not in extras:
        return ["setup.py has no 'remote' extra (grpcio, grpcio-health-checking, protobuf)"]
    expected = {}
    for line in extras["remote"] + [
        r for r in install if requirement(r)[0] in ("numpy", "gymnasium")
    ]:
        name, extras_, specifiers = requirement(line)
        expected[name] = (extras_, specifiers)
    listed = {}
    for line in requirements_text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, extras_, specifiers = requirement(line)
            listed[name] = (extras_, specifiers)
    problems = [f"requirements.txt lacks {n}" for n in sorted(expected.keys() - listed.keys())]
    problems += [
        f"requirements.txt has {n}, which the server does not need"
        for n in sorted(listed.keys() - expected.keys())
    ]
    for name in sorted(expected.keys() & listed.keys()):
        if listed[name] != expected[name]:
            problems.append(f"{name}: requirements.txt {listed[name]} != setup.py {expected[name]}")
    return problems


@pytest.mark.unit
def test_the_requirements_are_setups_ranges():
    assert requirement_problems(read(HERE, "requirements.txt"), read(ROOT, "setup.py")) == []


# A setup.py and requirements.txt that agree, to show that each kind of change is caught.
AGREEING_SETUP = """setup(
    install_requires=["tensorflow>=2.21,<2.22", "gymnasium[classic-control]>=1.1,<2", "numpy>=1.26"],
    extras_require={"remote": ["grpcio>=1.85,<1.86", "protobuf>=7.35,<8"], "test": ["pytest>=8"]},
)"""
AGREEING_REQUIREMENTS = """# comment
grpcio >= 1.85, <1.86
protobuf>=7.35,<8
numpy>=1.26
Gymnasium[Classic_Control]>=1.1,<2
"""


@pytest.mark.unit
def test_a_requirement_out_of_step_with_setup_is_caught():
    setup, requirements = AGREEING_SETUP, AGREEING_REQUIREMENTS
    assert requirement_problems(requirements, setup) == []
    moved = requirements.replace("grpcio >= 1.85", "grpcio>=1.84")
    assert [p.split(":")[0] for p in requirement_problems(moved, setup)] == ["grpcio"]
    no_extra = requirements.replace("[Classic_Control]", "")
    assert [p.split(":")[0] for p in requirement_problems(no_extra, setup)] == ["gymnasium"]
    assert requirement_problems(requirements.replace("numpy>=1.26", ""), setup) == [
        "requirements.txt lacks numpy"
    ]
    (extra,) = requirement_problems(requirements + "tensorflow>=2.21,<2.22\n", setup)
    assert "tensorflow" in extra
    assert (
        "no 'remote' extra" in requirement_problems(requirements, setup.replace("remote", "rpc"))[0]
    )


@pytest.mark.unit
def test_the_image_installs_the_requirements_and_copies_what_the_build_context_holds():
    copies = [arg.split() for ins, arg in DOCKERFILE if ins == "COPY"]
    assert ["deploy/env-server/requirements.txt", "./requirements.txt"] in copies
    assert any(
        re.search(r"pip install .*-r requirements\.txt", a) for i, a in DOCKERFILE if i == "RUN"
    )
    (base,) = [arg for ins, arg in DOCKERFILE if ins == "FROM"]
    assert base == "python:3.11-slim"
    ignore = [
        line.strip()
        for line in read(ROOT, ".dockerignore").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for *sources, _ in copies:
        for source in sources:
            assert os.path.exists(os.path.join(ROOT, source)), source
            parts = source.split("/")
            prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
            hidden = False
            for pattern in ignore:  # later patterns win; ! re-includes
                if any(fnmatch.fnmatch(p, pattern.lstrip("!")) for p in prefixes):
                    hidden = not pattern.startswith("!")
            assert not hidden, f".dockerignore hides {source} from the build"


def docs_problems(readme, manifest_text, docs, dockerfile):
    """Where the README and the manifest's comments disagree with the files they describe."""
    problems = []
    (token,) = [e for e in server_container(docs)["env"] if e["name"] == TOKEN_VARIABLE]
    ref = token["valueFrom"]["secretKeyRef"]
    create = f"kubectl create secret generic {ref['name']} --from-literal={ref['key']}="
    for where, text in [("README.md", readme), ("kubernetes.yaml", manifest_text)]:
        if create not in text:
            problems.append(f"{where} does not say how to create the Secret: {create}...")
    if f"-e {TOKEN_VARIABLE}" not in readme:
        problems.append(f"README.md's docker run does not pass -e {TOKEN_VARIABLE}")
    for variable in set(re.findall(r"\bRL_[A-Z_]+", readme + manifest_text)) - {TOKEN_VARIABLE}:
        problems.append(f"the docs name {variable}, not {TOKEN_VARIABLE}")
    exposed = [arg for ins, arg in dockerfile if ins == "EXPOSE"]
    for published in re.findall(r"-p \d+:(\d+)", readme):
        if [published] != exposed:
            problems.append(f"README.md publishes container port {published}, EXPOSE is {exposed}")
    service = only(docs, "Service")
    service_port = service["spec"]["ports"][0]["port"]
    image_envs = flag(exec_form(dockerfile, "CMD"), "env").split(",")
    pod_envs = flag(server_container(docs)["args"], "env").split(",")
    for host, port, env_id in re.findall(r"grpcs?://([\w.-]+):(\d+)/([\w/.-]+)", readme):
        if int(port) != service_port:
            problems.append(f"README.md's grpc://{host}:{port} is not port {service_port}")
        # Through the Service: the pods' envs; through localhost: docker run or a port-forward.
        served = pod_envs if host == service["metadata"]["name"] else image_envs + pod_envs
        if env_id not in served and "*" not in served:
            problems.append(f"README.md trains on {env_id}, which is not served")
    for path in re.findall(r"docker build -f (\S+)", readme):
        if not os.path.exists(os.path.join(ROOT, path)):
            problems.append(f"README.md builds {path}, which does not exist")
    return problems


@pytest.mark.unit
def test_the_docs_agree_with_the_files():
    assert docs_problems(README, MANIFEST_TEXT, DOCS, DOCKERFILE) == []
    wrong = README.replace("-p 50051:50051", "-p 50051:8080", 1)
    assert any("8080" in p for p in docs_problems(wrong, MANIFEST_TEXT, DOCS, DOCKERFILE))
    renamed = README.replace(TOKEN_VARIABLE, "RL_TOKEN")
    assert any("RL_TOKEN" in p for p in docs_problems(renamed, MANIFEST_TEXT, DOCS, DOCKERFILE))
    unserved = README.replace("/CartPole-v1", "/Pendulum-v1")
    assert any("Pendulum" in p for p in docs_problems(unserved, MANIFEST_TEXT, DOCS, DOCKERFILE))


# train.py's own flag parser and early checks: the set, the env URL (no TensorFlow, nothing
# written, no server contacted).
CHECK = """
import sys
from absl import flags
from rl.cli import checks, flag_table
flag_table.define_flags()
flags.FLAGS(["train.py", *sys.argv[1:]])
checks.check_early()
"""


@pytest.mark.process
def test_the_readmes_train_py_commands_parse():
    commands = re.findall(r"^python train\.py (.+)$", README, re.M)
    assert commands, "README.md shows no train.py command"
    for command in commands:
        args = shlex.split(command)
        assert flag(args, "env").startswith("grpc://"), command
        proc = subprocess.run(
            [sys.executable, "-c", CHECK, *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
