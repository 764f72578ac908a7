"""deploy/: the Dockerfiles and KubeRay manifests, checked without a cluster.

No Kubernetes cluster or Docker daemon is reachable from CI, so each manifest is checked
against what would reject it: core kinds and every pod template against Kubernetes' own
schemas (kubernetes-validate, strict: unknown fields fail); RayCluster and RayJob against
a schema of the KubeRay ray.io/v1 fields we use; each entrypoint's train.py command through
train.py's own flag parser and early checks; and the values that must agree across files
(Ray's version, images, the runs volume, replica and worker counts).
"""

import os
import re
import shlex
import subprocess
import sys

import jsonschema
import kubernetes_validate
import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEPLOY = os.path.join(ROOT, "deploy")
KUBERAY = os.path.join(DEPLOY, "kuberay")
KUBERNETES_VERSION = "1.33"  # GKE's regular channel on 2026-11-25

# The KubeRay v1 fields our manifests use (KubeRay's CRDs, ray.io_rayclusters.yaml and
# ray.io_rayjobs.yaml, hold the full schemas); anything else is a typo until added here.
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_COUNT = {"type": "integer", "minimum": 0}
_TEMPLATE = {"type": "object", "required": ["spec"]}  # a PodTemplateSpec: checked below
_CLUSTER_SPEC = {
    "type": "object",
    "additionalProperties": False,
    "required": ["rayVersion", "headGroupSpec"],
    "properties": {
        "rayVersion": {"type": "string", "pattern": r"^\d+\.\d+\.\d+$"},
        "enableInTreeAutoscaling": {"type": "boolean"},
        "authOptions": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "mode": {"enum": ["disabled", "token"]},
                "secretName": {"type": "string"},
            },
        },
        "headGroupSpec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["template"],
            "properties": {
                "rayStartParams": _STRING_MAP,
                "serviceType": {"enum": ["ClusterIP", "NodePort", "LoadBalancer"]},
                "template": _TEMPLATE,
            },
        },
        "workerGroupSpecs": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["groupName", "template"],
                "properties": {
                    "groupName": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
                    "replicas": _COUNT,
                    "minReplicas": _COUNT,
                    "maxReplicas": _COUNT,
                    "numOfHosts": {"type": "integer", "minimum": 1},
                    "rayStartParams": _STRING_MAP,
                    "template": _TEMPLATE,
                },
            },
        },
    },
}
_METADATA = {
    "type": "object",
    "required": ["name"],
    "properties": {"name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}},
}
RAY_SCHEMAS = {
    "RayCluster": {
        "type": "object",
        "additionalProperties": False,
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": "ray.io/v1"},
            "kind": {"const": "RayCluster"},
            "metadata": _METADATA,
            "spec": _CLUSTER_SPEC,
        },
    },
    "RayJob": {
        "type": "object",
        "additionalProperties": False,
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": "ray.io/v1"},
            "kind": {"const": "RayJob"},
            "metadata": _METADATA,
            "spec": {
                "type": "object",
                "additionalProperties": False,
                "required": ["entrypoint", "rayClusterSpec"],
                "properties": {
                    "entrypoint": {"type": "string", "minLength": 1},
                    "shutdownAfterJobFinishes": {"type": "boolean"},
                    "ttlSecondsAfterFinished": _COUNT,
                    "activeDeadlineSeconds": _COUNT,
                    "backoffLimit": _COUNT,
                    "submissionMode": {"enum": ["K8sJobMode", "HTTPMode", "InteractiveMode"]},
                    "runtimeEnvYAML": {"type": "string"},
                    "rayClusterSpec": _CLUSTER_SPEC,
                },
            },
        },
    },
}


def manifests():
    """(file name, document) of every YAML document under deploy/kuberay."""
    found = []
    for name in sorted(os.listdir(KUBERAY)):
        if name.endswith((".yaml", ".yml")):
            with open(os.path.join(KUBERAY, name), encoding="utf-8") as f:
                found.extend((name, doc) for doc in yaml.safe_load_all(f) if doc)
    return found


MANIFESTS = manifests()
RAY_MANIFESTS = [(name, doc) for name, doc in MANIFESTS if doc["kind"] in RAY_SCHEMAS]


def ids(cases):
    return [name for name, _ in cases]


def cluster_spec(doc):
    return doc["spec"] if doc["kind"] == "RayCluster" else doc["spec"]["rayClusterSpec"]


def pod_templates(doc):
    """(group name, pod template) of a Ray manifest's head and worker groups."""
    spec = cluster_spec(doc)
    yield "head", spec["headGroupSpec"]["template"]
    for group in spec.get("workerGroupSpecs", []):
        yield group["groupName"], group["template"]


@pytest.mark.unit
def test_there_are_ray_cluster_and_job_manifests_for_gpu_and_tpu():
    kinds = {(doc["kind"], name.split("-")[-1].split(".")[0]) for name, doc in MANIFESTS}
    for kind in ("RayCluster", "RayJob"):
        for accelerator in ("gpu", "tpu"):
            assert (kind, accelerator) in kinds


@pytest.mark.unit
@pytest.mark.parametrize("name, doc", MANIFESTS, ids=ids(MANIFESTS))
def test_each_manifest_passes_its_schema(name, doc):
    if doc["kind"] in RAY_SCHEMAS:
        jsonschema.validate(doc, RAY_SCHEMAS[doc["kind"]])
        for group, template in pod_templates(doc):
            # The pod template as the Pod KubeRay makes of it, against Kubernetes' schema.
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": group}}
            kubernetes_validate.validate(
                {**pod, "spec": template["spec"]}, KUBERNETES_VERSION, strict=True
            )
    else:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


@pytest.mark.unit
def test_the_schemas_reject_what_kubernetes_and_kuberay_would():
    # The checks can fail: a misspelt Ray field, a misspelt container field, a bad count.
    name, doc = RAY_MANIFESTS[0]
    spec = cluster_spec(doc)
    with pytest.raises(jsonschema.ValidationError, match="headGroupSpecs"):
        jsonschema.validate(
            {**doc, "spec": {**doc["spec"], "headGroupSpecs": {}}}, RAY_SCHEMAS[doc["kind"]]
        )
    container = {**spec["headGroupSpec"]["template"]["spec"]["containers"][0], "imagee": "x"}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    with pytest.raises(kubernetes_validate.ValidationError, match="imagee"):
        kubernetes_validate.validate(
            {**pod, "spec": {"containers": [container]}}, KUBERNETES_VERSION, strict=True
        )
    bad_group = {"groupName": "actors", "replicas": -1, "template": {"spec": {}}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {**doc, "kind": "RayCluster", "spec": {**spec, "workerGroupSpecs": [bad_group]}},
            RAY_SCHEMAS["RayCluster"],
        )


def ray_version_in_setup():
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
        low, high = re.search(r'"ray\[default\]>=([\d.]+),<([\d.]+)"', f.read()).groups()
    return low, high


@pytest.mark.unit
@pytest.mark.parametrize("name, doc", RAY_MANIFESTS, ids=ids(RAY_MANIFESTS))
def test_each_cluster_has_token_authentication_on(name, doc):
    # As scripts/check_cluster.sh's container cluster runs it (RAY_AUTH_MODE=token and one
    # token on every node), which KubeRay's authOptions sets up.
    spec = doc["spec"].get("rayClusterSpec", doc["spec"])
    assert spec.get("authOptions") == {"mode": "token"}, name


@pytest.mark.unit
@pytest.mark.parametrize("name, doc", RAY_MANIFESTS, ids=ids(RAY_MANIFESTS))
def test_manifests_agree_with_setup_the_dockerfiles_and_the_volume(name, doc):
    spec = cluster_spec(doc)
    low, high = ray_version_in_setup()
    version = tuple(int(p) for p in spec["rayVersion"].split("."))
    assert (
        tuple(int(p) for p in low.split(".")) <= version < tuple(int(p) for p in high.split("."))
    ), "rayVersion must be the Ray that setup.py installs in the images"
    (pvc,) = [d for n, d in MANIFESTS if d["kind"] == "PersistentVolumeClaim"]
    for group, template in pod_templates(doc):
        (container,) = template["spec"]["containers"]
        variant = container["image"].rsplit(":", 1)[1]
        dockerfile = "Dockerfile" if variant == "cpu" else f"Dockerfile.{variant}"
        assert os.path.exists(os.path.join(DEPLOY, dockerfile)), container["image"]
        assert container["workingDir"] == "/rl"  # WORKDIR of every Dockerfile
        for group_spec in spec.get("workerGroupSpecs", []):
            counts = [group_spec.get(k, 1) for k in ("minReplicas", "replicas", "maxReplicas")]
            assert counts == sorted(counts), group_spec["groupName"]
    head = spec["headGroupSpec"]["template"]["spec"]
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in head["volumes"]}
    assert set(claims.values()) == {pvc["metadata"]["name"]}
    limits = head["containers"][0]["resources"]["limits"]
    accelerator = name.split("-")[-1].split(".")[0]
    assert {"gpu": "nvidia.com/gpu", "tpu": "google.com/tpu"}[accelerator] in limits


def train_args(entrypoint):
    words = shlex.split(entrypoint)
    assert words[:2] == ["python", "/rl/train.py"], entrypoint
    return words[2:]


def flag(args, name, default=None):
    for i, word in enumerate(args):
        if word == f"--{name}":
            return args[i + 1]
        if word.startswith(f"--{name}="):
            return word.split("=", 1)[1]
    return default


# train.py's own parser and early checks (no TensorFlow, nothing written), then the set's
# num_envs, for the checks that need a built run.
CHECK = """
import json, sys
from absl import flags
from rl.cli import checks, flag_table
flag_table.define_flags()
flags.FLAGS(["train.py", *sys.argv[1:]])
checks.check_early()
hp = flag_table.hparams_from_flags()
print(json.dumps({k: getattr(hp, k, None) for k in
                  ("agent", "num_envs", "rollout_steps", "num_minibatches", "batch_size")}))
"""

JOBS = [(name, doc) for name, doc in RAY_MANIFESTS if doc["kind"] == "RayJob"]


@pytest.mark.process
@pytest.mark.parametrize("name, doc", JOBS, ids=ids(JOBS))
def test_each_job_runs_a_train_py_command_that_train_py_accepts(name, doc):
    args = train_args(doc["spec"]["entrypoint"])
    proc = subprocess.run(
        [sys.executable, "-c", CHECK, *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    hp = yaml.safe_load(proc.stdout.splitlines()[-1])
    num_envs = hp["num_envs"]
    spec = doc["spec"]["rayClusterSpec"]
    head = spec["headGroupSpec"]["template"]["spec"]
    mounts = [m["mountPath"] for m in head["containers"][0]["volumeMounts"]]
    assert any(flag(args, "output_dir").startswith(m + "/") for m in mounts), "run folder kept"
    workers = int(flag(args, "num_workers", "0"))
    assert workers == 0 or num_envs % workers == 0
    if flag(args, "sys") == "ray":
        # Each Ray actor asks for one CPU; the head offers none (num-cpus 0).
        cpus = sum(
            group["replicas"]
            * int(group["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"])
            for group in spec["workerGroupSpecs"]
        )
        assert spec["headGroupSpec"]["rayStartParams"].get("num-cpus") == "0"
        assert workers <= cpus
    if flag(args, "sys") == "tpu":
        assert flag(args, "tpu") == "local"  # the learner runs on the TPU host itself
        chips = int(head["containers"][0]["resources"]["limits"]["google.com/tpu"])
        x, y = head["nodeSelector"]["cloud.google.com/gke-tpu-topology"].split("x")
        assert chips == int(x) * int(y)  # a single-host slice: all its chips in this pod
        # The batch each update splits over the replicas (Learner.check_divisible).
        split = {
            "ppo": num_envs * (hp["rollout_steps"] or 0) // (hp["num_minibatches"] or 1),
            "a2c": num_envs * (hp["rollout_steps"] or 0),  # one step on the whole rollout
            "vpg": num_envs * (hp["rollout_steps"] or 0),
            "dqn": hp["batch_size"],
        }.get(hp["agent"], num_envs)  # IMPALA: the env copies
        assert split % chips == 0


@pytest.mark.process
def test_a_bad_flag_in_an_entrypoint_would_be_caught():
    name, doc = JOBS[0]
    args = [*train_args(doc["spec"]["entrypoint"]), "--num_worker", "8"]
    proc = subprocess.run(
        [sys.executable, "-c", CHECK, *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert proc.returncode != 0 and "num_worker" in proc.stderr


DOCKERFILES = sorted(n for n in os.listdir(DEPLOY) if n.startswith("Dockerfile"))


def dockerignore_patterns():
    with open(os.path.join(ROOT, ".dockerignore"), encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def ignored(path, patterns):
    import fnmatch

    hit = False
    for pattern in patterns:
        negate, pattern = pattern.startswith("!"), pattern.lstrip("!")
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(fnmatch.fnmatch(p, pattern) for p in prefixes):
            hit = not negate
    return hit


@pytest.mark.unit
@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_each_dockerfile_copies_what_exists_and_installs_declared_extras(dockerfile):
    with open(os.path.join(DEPLOY, dockerfile), encoding="utf-8") as f:
        text = f.read()
    patterns = dockerignore_patterns()
    for line in re.findall(r"^COPY (?!--from=)(.+)$", text, re.M):  # not from an earlier stage
        *sources, _ = line.split()
        for source in sources:
            assert os.path.exists(os.path.join(ROOT, source)), f"{dockerfile}: {source}"
            assert not ignored(source, patterns), f"{dockerfile}: .dockerignore hides {source}"
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
        setup = f.read()
    for extras in re.findall(r'-e "\.\[([a-z0-9,]+)\]"', text):
        for extra in extras.split(","):
            assert f'"{extra}": [' in setup, f"{dockerfile}: no extra {extra!r} in setup.py"
    assert 'ENTRYPOINT ["python", "train.py"]' in text
    assert re.search(r"^WORKDIR /rl$", text, re.M)
