"""What a user installs and deploys, checked without a cluster:

- `meson install` puts bin/gossip (which runs) and share/gossip/{configs,topologies,deploy} into
  the prefix, and the installed quickstart config still finds its topology;
- deploy/kubernetes/*.yaml, read with a YAML parser: an Indexed Job whose ranks come from the
  completion index (pods not restarted), its pods under a headless Service whose port is the
  container's and the peers' port, a `peers:` list that names exactly those pods, results on a
  PersistentVolumeClaim, and a config and topology that `gossip` itself loads; the collect Job
  mounts the same claim and config;
- every object of every deploy/kubernetes/*.yaml against the Kubernetes API's schema, offline
  (python3-kubernetes' models: every field known to its type, of the right kind, the required
  ones present);
- deploy/kubernetes/gossip-elastic.yaml: a StatefulSet behind a headless Service whose pods are
  the elastic topology's peers (its first n at the start, up to max_peers by `kubectl scale`),
  ranks past n started with `--join` to members, SIGTERM handed to the peer, and a config,
  topology and start script that gossip and sh accept;
- deploy/docker/Dockerfile: a Debian 12 base, the build packages scripts/setup.sh installs, and
  in the final image a package for every library the gossip binary links, plus
  dataset-fashion-mnist.

- scripts/gpu-bundle.sh --no-build: what a GPU machine without Debian's packages is carried
  (the binaries, the plugin, the libraries they link that such a machine lacks and never the
  ones it has, Fashion-MNIST), under 60 MB; a build without the CUDA plugin is refused.

The manifests and the image are not run here (no cluster, no container daemon in CI).
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

import yaml

from gossip_test import GOSSIP, SOURCE, Checks, run

BUILD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(SOURCE, "build")


def check_install(t):
    meson = shutil.which("meson")
    if not t.check(meson is not None, "meson is on the PATH"):
        return
    dest = tempfile.mkdtemp(prefix="gossip-install-")
    try:
        code, out = run([meson, "install", "-C", BUILD, "--no-rebuild", "--destdir", dest], 120)
        if not t.check(code == 0, "meson install --destdir succeeds", out):
            return
        code, out = run([meson, "introspect", BUILD, "--buildoptions"], 30)
        prefix = re.search(r'"name": "prefix", "value": "([^"]+)"', out)
        root = dest + (prefix.group(1) if prefix else "/usr/local")
        gossip = os.path.join(root, "bin", "gossip")
        code, out = run([gossip, "--help"], 30)
        t.check(code == 0 and "collect" in out, "the installed bin/gossip runs", out)
        share = os.path.join(root, "share", "gossip")
        for f in ("configs/quickstart.yaml", "topologies/ring-8.yaml",
                  "deploy/slurm/gossip-ring.sbatch", "deploy/kubernetes/gossip-ring-8.yaml",
                  "deploy/docker/Dockerfile"):
            t.check(os.path.exists(os.path.join(share, f)), f"share/gossip/{f} is installed")
        t.check(os.path.exists(os.path.join(root, "share", "doc", "gossip", "README.md")),
                "share/doc/gossip/README.md is installed")
        # The installed config names its topology as ../topologies/ring-8.yaml: it must load.
        code, out = run([gossip, "peer", os.path.join(share, "configs", "quickstart.yaml"),
                         "--rank", "8"], 30)
        t.check(code == 2 and "rank 8 is out of range: the topology has 8 peers" in out,
                "the installed quickstart config and its topology load", out)
    finally:
        shutil.rmtree(dest, ignore_errors=True)


def by_kind(docs, kind, name=None):
    found = [d for d in docs if d and d.get("kind") == kind
             and (name is None or d["metadata"]["name"] == name)]
    return found[0] if found else None


def check_kubernetes(t):
    folder = os.path.join(SOURCE, "deploy", "kubernetes")
    with open(os.path.join(folder, "gossip-ring-8.yaml")) as f:
        docs = list(yaml.safe_load_all(f))
    job, svc = by_kind(docs, "Job"), by_kind(docs, "Service")
    cm, pvc = by_kind(docs, "ConfigMap"), by_kind(docs, "PersistentVolumeClaim")
    if not t.check(all((job, svc, cm, pvc)), "the manifest has a Job, a Service, a ConfigMap and "
                   "a PersistentVolumeClaim", [d.get("kind") for d in docs if d]):
        return
    spec = job["spec"]
    pod = spec["template"]["spec"]
    n = spec.get("completions")
    t.check(job["apiVersion"] == "batch/v1" and spec.get("completionMode") == "Indexed",
            "an Indexed Job: ranks from the completion index (JOB_COMPLETION_INDEX)")
    t.check(n == spec.get("parallelism") and isinstance(n, int) and n > 1,
            f"all {n} completions run at once (parallelism)", spec)
    t.check(pod.get("restartPolicy") == "Never" and spec.get("backoffLimit") == 0,
            "finished pods are not restarted, a failed pod is not retried")
    t.check(svc["spec"].get("clusterIP") == "None" and pod.get("subdomain") == svc["metadata"]["name"],
            "pods get DNS names JOB-R.SERVICE from a headless Service", svc["spec"])
    labels = spec["template"]["metadata"]["labels"]
    t.check(all(labels.get(k) == v for k, v in svc["spec"]["selector"].items()),
            "the Service selects the Job's pods", (svc["spec"]["selector"], labels))
    container = pod["containers"][0]
    port = svc["spec"]["ports"][0]["port"]
    t.check([p["containerPort"] for p in container.get("ports", [])] == [port],
            f"the container port is the Service's ({port})")
    command = container["command"]
    t.check(command[:2] == ["gossip", "peer"] and "--out" in command,
            "each pod runs gossip peer CONFIG --out DIR", command)
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    # The run's TLS credentials: a Secret mounted read-only where --tls-dir points.
    tls = [name for name, v in volumes.items() if "secret" in v]
    t.check(len(tls) == 1 and "--tls-dir" in command
            and command[command.index("--tls-dir") + 1] == mounts.get(tls[0])
            and volumes[tls[0]]["secret"].get("defaultMode") == 0o400,
            "the run's TLS credentials come from a Secret, mounted where --tls-dir points, "
            "readable by the owner only", (command, mounts, volumes))
    out_dir = command[command.index("--out") + 1]
    results = [name for name, path in mounts.items() if path == out_dir]
    t.check(len(results) == 1 and volumes[results[0]].get("persistentVolumeClaim", {}).get("claimName")
            == pvc["metadata"]["name"] and "ReadWriteMany" in pvc["spec"]["accessModes"],
            "results go to a ReadWriteMany claim that outlives the pods", (mounts, volumes))
    config_mount = [name for name, v in volumes.items() if v.get("configMap", {}).get("name") == cm["metadata"]["name"]]
    t.check(len(config_mount) == 1 and command[2].startswith(mounts[config_mount[0]] + "/")
            and os.path.basename(command[2]) in cm["data"],
            "the config comes from the ConfigMap", (command, mounts))

    run_cfg = yaml.safe_load(cm["data"][os.path.basename(command[2])])
    topo_key = run_cfg["gossip"]["topology"]
    topo = yaml.safe_load(cm["data"].get(topo_key, "{}"))
    want = [f"{job['metadata']['name']}-{i}.{svc['metadata']['name']}:{port}" for i in range(n or 0)]
    t.check(topo.get("n") == n and topo.get("peers") == want,
            f"the topology's peers: are the Job's {n} pods at the Service's port", topo.get("peers"))
    # gossip itself loads the config and topology (it stops at the rank check, before any data).
    tmp = tempfile.mkdtemp(prefix="gossip-k8s-")
    try:
        for key, text in cm["data"].items():
            with open(os.path.join(tmp, key), "w") as f:
                f.write(text)
        code, out = run([GOSSIP, "peer", os.path.join(tmp, os.path.basename(command[2])),
                         "--rank", str(n)], 30, {"JOB_COMPLETION_INDEX": "0"})
        t.check(code == 2 and f"rank {n} is out of range: the topology has {n} peers" in out,
                "gossip loads the ConfigMap's config and topology", out)
        code, out = run([GOSSIP, "topo", os.path.join(tmp, topo_key)], 30)
        t.check(code == 0, "gossip topo finds the ring connected", out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    with open(os.path.join(folder, "gossip-collect.yaml")) as f:
        collect = by_kind(list(yaml.safe_load_all(f)), "Job")
    cpod = collect["spec"]["template"]["spec"]
    c = cpod["containers"][0]
    cmounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    cvolumes = {v["name"]: v for v in cpod["volumes"]}
    claims = {cmounts[k]: v.get("persistentVolumeClaim", {}).get("claimName") for k, v in cvolumes.items()}
    maps = {cmounts[k]: v.get("configMap", {}).get("name") for k, v in cvolumes.items()}
    t.check(c["command"] == ["gossip", "collect", out_dir] and claims.get(out_dir) == pvc["metadata"]["name"]
            and maps.get(mounts[config_mount[0]]) == cm["metadata"]["name"]
            and cpod.get("restartPolicy") == "Never",
            "the collect Job runs gossip collect on the same claim, with the config where the "
            "peers recorded it", (c, cpod["volumes"]))


def schema_errors(value, typ, path):
    """What in `value` does not fit the Kubernetes type `typ` (a python3-kubernetes model name
    or an openapi type string): unknown fields, wrong kinds, missing required fields."""
    import kubernetes.client as k8s
    if typ.startswith("list["):
        if not isinstance(value, list):
            return [f"{path}: a list expected, not {type(value).__name__}"]
        return [e for i, v in enumerate(value) for e in schema_errors(v, typ[5:-1], f"{path}[{i}]")]
    if typ.startswith("dict("):
        if not isinstance(value, dict):
            return [f"{path}: a map expected, not {type(value).__name__}"]
        inner = typ[typ.index(",") + 1:-1].strip()
        return [e for k, v in value.items() for e in schema_errors(v, inner, f"{path}.{k}")]
    simple = {"str": (str,), "int": (int,), "bool": (bool,), "float": (int, float)}
    if typ in simple:
        ok = isinstance(value, simple[typ]) and not (typ == "int" and isinstance(value, bool))
        return [] if ok else [f"{path}: {typ} expected, not {value!r}"]
    if typ in ("object", "datetime", "date"):
        return []
    model = getattr(k8s.models, typ, None)
    if model is None:
        return [f"{path}: unknown type {typ}"]
    if not isinstance(value, dict):
        return [f"{path}: a {typ} object expected, not {value!r}"]
    field = {json: attr for attr, json in model.attribute_map.items()}
    errors = []
    for key, v in value.items():
        if key not in field:
            errors.append(f"{path}.{key}: not a field of {typ}")
        else:
            errors += schema_errors(v, model.openapi_types[field[key]], f"{path}.{key}")
    try:  # the model's own check: required fields (and enumerations) of a present object
        model(**{field[k]: v for k, v in value.items() if k in field})
    except (ValueError, TypeError) as e:
        errors.append(f"{path}: {e}")
    return errors


def check_schema(t):
    try:
        import kubernetes.client  # noqa: F401
    except ImportError:
        t.check(False, "python3-kubernetes is installed (scripts/setup.sh installs it)")
        return
    kinds = {("v1", "ConfigMap"): "V1ConfigMap", ("v1", "Service"): "V1Service",
             ("v1", "PersistentVolumeClaim"): "V1PersistentVolumeClaim",
             ("batch/v1", "Job"): "V1Job", ("apps/v1", "StatefulSet"): "V1StatefulSet"}
    folder = os.path.join(SOURCE, "deploy", "kubernetes")
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".yaml"):
            continue
        with open(os.path.join(folder, name)) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        errors = []
        for d in docs:
            typ = kinds.get((d.get("apiVersion"), d.get("kind")))
            if typ is None:
                errors.append(f"{d.get('apiVersion')} {d.get('kind')}: not a kind this check knows")
                continue
            errors += schema_errors(d, typ, f"{d['kind']} {d.get('metadata', {}).get('name')}")
        t.check(docs and not errors, f"{name}: every object fits the Kubernetes schema "
                f"({', '.join(d['kind'] for d in docs)})", errors)
    # The check itself refuses what it should: a misspelt field, a wrong kind, a missing one.
    bad = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "x"},
           "spec": {"replica": 3, "selector": {"matchLabels": {"a": "b"}},
                    "template": {"spec": {"containers": [{"image": "i", "ports": [{"containerPort": "7100"}]}]}}}}
    errors = schema_errors(bad, "V1StatefulSet", "bad")
    t.check(any("replica: not a field" in e for e in errors)
            and any("containerPort: int expected" in e for e in errors)
            and any("name" in e and "None" in e for e in errors),
            "the schema check refuses an unknown field, a wrong type and a missing required one",
            errors)


def check_elastic(t):
    with open(os.path.join(SOURCE, "deploy", "kubernetes", "gossip-elastic.yaml")) as f:
        docs = list(yaml.safe_load_all(f))
    sts, svc, cm = by_kind(docs, "StatefulSet"), by_kind(docs, "Service"), by_kind(docs, "ConfigMap")
    if not t.check(all((sts, svc, cm)), "the elastic manifest has a StatefulSet, a Service and a "
                   "ConfigMap", [d.get("kind") for d in docs if d]):
        return
    spec, pod = sts["spec"], sts["spec"]["template"]["spec"]
    name, port = sts["metadata"]["name"], svc["spec"]["ports"][0]["port"]
    t.check(svc["spec"].get("clusterIP") == "None" and spec.get("serviceName") == svc["metadata"]["name"],
            "pods get DNS names POD.SERVICE from the headless Service", (spec.get("serviceName"), svc["spec"]))
    run_cfg = yaml.safe_load(cm["data"]["run.yaml"])
    topo = yaml.safe_load(cm["data"][run_cfg["gossip"]["topology"]])
    want = [f"{name}-{r}.{svc['metadata']['name']}:{port}" for r in range(topo.get("max_peers", 0))]
    t.check(topo.get("elastic") is True and topo.get("peers") == want and spec.get("replicas") == topo.get("n"),
            f"the elastic topology's {topo.get('max_peers')} identities are the StatefulSet's pods; "
            f"it starts with n = {topo.get('n')} replicas", (topo, spec.get("replicas")))
    t.check(spec.get("podManagementPolicy") == "Parallel" and pod.get("terminationGracePeriodSeconds", 30) >= 30,
            "pods start and stop at once, with time to leave gracefully", spec)
    script = cm["data"]["peer.sh"]
    code, out = run(["sh", "-n", "-c", script], 10)
    t.check(code == 0, "the start script is valid sh", out)
    joins = re.findall(r"--join (\S+)", script)
    t.check(joins and all(a in want[:topo["n"]] for a in joins[0].split(","))
            and f'-ge {topo["n"]}' in script and "trap" in script and "TERM" in script,
            "ranks past n start with --join to first members; SIGTERM is handed to the peer", joins)
    tmp = tempfile.mkdtemp(prefix="gossip-k8s-elastic-")
    try:
        for key, text in cm["data"].items():
            with open(os.path.join(tmp, key), "w") as f:
                f.write(text)
        code, out = run([GOSSIP, "topo", os.path.join(tmp, run_cfg["gossip"]["topology"])], 30)
        t.check(code == 0 and "members" in out, "gossip topo loads the elastic topology", out)
        n = topo["max_peers"]
        code, out = run([GOSSIP, "peer", os.path.join(tmp, "run.yaml"), "--rank", str(n)], 30)
        t.check(code == 2 and f"rank {n} is out of range: the topology has {n} peers" in out,
                f"gossip loads the config: its run has {n} identities", out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def dockerfile_stages(text):
    """[(base image, [packages apt-get installs])] per FROM."""
    stages = []
    text = text.replace("\\\n", " ")
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("FROM "):
            stages.append((line.split()[1], []))
        elif line.startswith("RUN ") and stages:
            for cmd in re.split(r"&&|;", line[4:]):
                words = shlex.split(cmd)
                if "apt-get" in words and "install" in words:
                    stages[-1][1].extend(w for w in words[words.index("install") + 1:]
                                         if not w.startswith("-"))
    return stages


def package_of(path):
    """The Debian package that owns a library path (usrmerge: /lib is /usr/lib)."""
    for p in (path, os.path.realpath(path), "/usr" + path if path.startswith("/lib") else path):
        code, out = run(["dpkg", "-S", p], 10)
        if code == 0:
            return out.split(":")[0].strip()
    return None


def check_dockerfile(t):
    with open(os.path.join(SOURCE, "deploy", "docker", "Dockerfile")) as f:
        stages = dockerfile_stages(f.read())
    if not t.check(len(stages) >= 2, "the Dockerfile builds in one stage and runs in another", stages):
        return
    t.check(all(base.startswith("debian:12") or base.startswith("debian:bookworm") for base, _ in stages),
            "every stage is Debian 12", [b for b, _ in stages])
    build, final = stages[0][1], stages[-1][1]
    with open(os.path.join(SOURCE, "scripts", "setup.sh")) as f:
        setup = re.search(r"packages=\(([^)]*)\)", f.read()).group(1).split()
    # The image is the binary (-Dpython=disabled): the Python module's packages stay out.
    needed = [p for p in setup if p.endswith("-dev") and p not in (
        "libclang-rt-14-dev", "python3-dev", "pybind11-dev")] + ["meson", "g++"]
    t.check(all(p in build for p in needed), "the build stage installs the build packages of "
            "scripts/setup.sh", sorted(set(needed) - set(build)))
    t.check("dataset-fashion-mnist" in final, "the image has dataset-fashion-mnist")
    # Every library the binary needs directly comes from a package the final stage installs
    # (libc6 is in every Debian image). A CUDA build's toolkit libraries belong to no package and
    # are not in this CPU image.
    code, out = run(["ldd", GOSSIP], 30)
    code_r, needed_out = run(["readelf", "-d", GOSSIP], 30)
    direct = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", needed_out)
    paths = dict(re.findall(r"^\s*(\S+) => (\S+)", out, re.MULTILINE))
    missing = []
    for lib in direct:
        pkg = package_of(paths.get(lib, lib))
        if pkg is None:
            print(f"note: {lib} belongs to no Debian package (a CUDA build?); not in the CPU image")
            continue
        if pkg != "libc6" and pkg not in final:
            missing.append(f"{lib} ({pkg})")
    t.check(code == 0 and code_r == 0 and direct and not missing,
            "the final stage installs a package for every library gossip links", missing or out)
    with open(os.path.join(SOURCE, "deploy", "kubernetes", "gossip-ring-8.yaml")) as f:
        t.check("deploy/docker/Dockerfile" in f.read(), "the manifest says how to build its image")


def check_python_build(t, bundle, folder):
    """scripts/python-build.sh as on a GPU machine: in a folder holding only the checkout's
    include/, python/ and the script, and the unpacked bundle, it builds the Python package with
    this machine's compiler and python3 against the bundle's rooms; the package then trains."""
    here = os.path.join(folder, "checkout")
    os.makedirs(os.path.join(here, "scripts"))
    for d in ("include", "python"):
        shutil.copytree(os.path.join(SOURCE, d), os.path.join(here, d))
    shutil.copy(os.path.join(SOURCE, "scripts", "python-build.sh"), os.path.join(here, "scripts"))
    code, out = run(["tar", "xJf", bundle, "-C", here, "gpu-bundle"], 120)
    if not t.check(code == 0, "the bundle unpacks", out):
        return
    for f in ("libgossip-rooms.a", "flags", "libraries"):
        t.check(os.path.exists(os.path.join(here, "gpu-bundle", "python", f)),
                f"the bundle holds gpu-bundle/python/{f}")
    python = "/usr/bin/python3"
    env = dict(os.environ, PYTHON=python)
    code, out = run(["bash", os.path.join(here, "scripts", "python-build.sh"), "pkg"], 300,
                    env=env, cwd=here)
    t.check(code == 0 and "import gossip works" in out,
            "python-build.sh builds the package from the bundle with this machine's compiler", out)
    cfg = os.path.join(folder, "c.yaml")
    with open(os.path.join(folder, "topo.yaml"), "w") as f:
        f.write("generator: ring\nn: 4\n")
    with open(cfg, "w") as f:
        f.write("data:\n  synthetic: {train: 512, test: 128, dim: 8, classes: 3}\n"
                "model: {layers: [8, 16, 3]}\noptimizer: {lr: 0.05, momentum: 0.9}\n"
                "train: {epochs: 2, batch: 16, seed: 3}\n"
                "gossip: {topology: topo.yaml, algorithm: dpsgd}\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(here, "pkg"),
               LD_LIBRARY_PATH=os.path.join(here, "gpu-bundle", "lib"))
    code, out = run([python, "-c", "import gossip, sys; s = gossip.sim(sys.argv[1]); "
                     "print(gossip.__file__, s['exit_code'], s['test_accuracy'])", cfg], 120,
                    env=env)
    words = out.split()
    t.check(code == 0 and len(words) >= 3 and words[-3].startswith(os.path.join(here, "pkg"))
            and words[-2] == "0" and float(words[-1]) > 0.8,
            "the package built from the bundle simulates 4 peers (accuracy > 0.8)", out)


def check_gpu_bundle(t):
    script = os.path.join(SOURCE, "scripts", "gpu-bundle.sh")
    env = dict(os.environ, GOSSIP_BUILD_DIR=BUILD)
    folder = tempfile.mkdtemp(prefix="gossip-bundle-")
    try:
        bundle = os.path.join(folder, "b.tar.xz")
        if not os.path.exists(os.path.join(BUILD, "src", "compute", "libgossip-cuda.so")):
            code, out = run(["bash", script, "--no-build", bundle], 120, env=env)
            t.check(code == 1 and "libgossip-cuda.so is missing" in out,
                    "gpu-bundle.sh refuses a build without the CUDA plugin", out)
            return
        code, out = run(["bash", script, "--no-build", bundle], 240, env=env)
        if not t.check(code == 0 and os.path.exists(bundle), "gpu-bundle.sh --no-build packs",
                       out):
            return
        size = os.path.getsize(bundle)
        t.check(size < 60_000_000, f"the bundle is under 60 MB ({size / 1e6:.1f} MB)")
        code, listing = run(["tar", "tJf", bundle], 60)
        names = set(listing.split())
        for need in ("build/src/cli/gossip", "build/tests/test_cuda",
                     "build/src/compute/libgossip-cuda.so", "gpu-bundle/lib/libopenblas.so.0",
                     "gpu-bundle/lib/libyaml-cpp.so.0.7", "gpu-bundle/lib/libdnnl.so.2",
                     "gpu-bundle/fashion-mnist/train-images-idx3-ubyte.gz",
                     "gpu-bundle/fashion-mnist/t10k-labels-idx1-ubyte.gz", "gpu-bundle/commit"):
            t.check(need in names, f"the bundle holds {need}", listing)
        system = [n for n in names if re.search(
            r"/lib(c|m|stdc\+\+|gcc_s|ssl|crypto|z|cuda|cudart|cublas|cublasLt|cudnn)\.so", n)]
        t.check(not system, "the bundle carries none of the libraries such a machine has", system)
        check_python_build(t, bundle, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main():
    # The schema check needs Debian's python3-kubernetes, which only Debian's interpreter sees:
    # another python3 first on the PATH hands this test over to it.
    try:
        import kubernetes  # noqa: F401
    except ImportError:
        debian = "/usr/bin/python3"
        if os.path.exists(debian) and os.path.realpath(sys.executable) != os.path.realpath(debian):
            os.execv(debian, [debian] + sys.argv)
    t = Checks("deploy")
    check_install(t)
    check_kubernetes(t)
    check_schema(t)
    check_elastic(t)
    check_dockerfile(t)
    check_gpu_bundle(t)
    t.finish()


if __name__ == "__main__":
    main()
