#!/usr/bin/env bash
# Build the Docker Space image and prove it serves: a check a maintainer runs by hand, not part of CI
# (CI has 90 minutes and no buildah; the build alone trains the default model for minutes).
#
#   sudo bash scripts/container_check.sh               build (cached layers reused) and check
#   sudo bash scripts/container_check.sh --no-cache    rebuild every layer (for the build time)
#   sudo bash scripts/container_check.sh --torch cuda  the GPU Space's image (PyPI's CUDA build of torch)
#   sudo bash scripts/container_check.sh --no-build    check the image built earlier (steps 3-4 only)
#   sudo PORT=17860 bash scripts/container_check.sh    when something else already listens on 7860
#
# Needs root and the Debian packages buildah, podman and debootstrap (apt-get install buildah podman
# debootstrap), plus curl. No Docker daemon is used:
#   1. the base. Where docker.io cannot be reached, python:3.11-slim cannot be pulled, so a STAND-IN
#      is built once from Debian bookworm (whose python3 is 3.11) with debootstrap and imported as
#      localhost/python:3.11-slim; later runs reuse it. This machine's pip settings and CA bundle are
#      copied into it, and the local folders they name (find-links, file:// indexes) are bind-mounted
#      read-only into the build's RUN steps. STANDIN_BASE=0 pulls the real image instead.
#   2. buildah bud --isolation chroot --pull=never of ./Dockerfile with --build-arg TORCH=cpu (the
#      default) or cuda (--torch cuda) -> localhost/bertviz-app:check-cpu or :check-cuda (IMAGE=...
#      names another tag); its build time is printed. For cpu, when the stand-in base's pip settings
#      name a local folder that holds torch's CPU wheel (torch-<requirements.txt's version>+cpu-*.whl),
#      the build gets --build-arg TORCH_CPU_INDEX= (empty: pip's own sources, that folder) instead of
#      torch's CPU index, which may not be reachable here; TORCH_CPU_INDEX=<url> passes another one.
#      Then the torch inside the image is printed: its version and CUDA version (None for cpu).
#      --no-build skips this step and checks the $IMAGE already there.
#   3. a working container of the image; as uid 1000 it checks that models/default is in the image
#      and models/runs is writable, then starts `python app.py` (buildah run: the host's network, so
#      the app's port is this machine's PORT) and times the cold start: seconds until the first
#      answer (the start-up placeholder, HTTP 503), until the real page answers 200 on /, and until
#      POST /v1/predict classifies a sentence.
#   4. the image's size, then clean-up: the app is stopped and the working container removed (the
#      image is kept; remove it with `buildah rmi localhost/bertviz-app:check-cpu`, or -cuda).
# Any failure ends it with a line starting "FAILED:" and a non-zero exit. Runs under `nice`
# (NICE=10 by default), since the build and the app's start are CPU-bound.
set -euo pipefail
cd "$(dirname "$0")/.."

BASE="localhost/python:3.11-slim"
STANDIN_LABEL="org.bertviz.standin"
PORT="${PORT:-7860}"
NICE="${NICE:-10}"
START_TIMEOUT="${START_TIMEOUT:-900}"   # seconds the app may take to answer /v1/predict
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SENTENCE="A gorgeous, moving film."
no_cache=(); torch=cpu; build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --no-cache) no_cache=(--no-cache) ;;
    --no-build) build=0 ;;
    --torch) [ $# -ge 2 ] || { echo "--torch needs a value: cpu or cuda" >&2; exit 2; }; torch="$2"; shift ;;
    --torch=*) torch="${1#--torch=}" ;;
    *) echo "unknown option: $1 (use --no-cache or --no-build, and --torch cpu|cuda)" >&2; exit 2 ;;
  esac
  shift
done
case "$torch" in
  cpu|cuda) ;;
  *) echo "--torch must be cpu or cuda, not '$torch'" >&2; exit 2 ;;
esac
IMAGE="${IMAGE:-localhost/bertviz-app:check-$torch}"

say() { printf '[container_check %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }
fail() { printf '[container_check %s] FAILED: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; exit 1; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

[ "$(id -u)" = 0 ] || fail "run as root (buildah's chroot isolation and debootstrap need it)"
for tool in buildah podman curl; do
  command -v "$tool" >/dev/null || fail "$tool is missing: apt-get install buildah podman debootstrap curl"
done

# --- pip settings of this machine: `pip config list` (files and PIP_* variables) -------------------
# Prints "section.key=value" lines; ":env:" (a PIP_* variable) counts as [global] and wins.
pip_settings() {
  command -v pip >/dev/null || return 0
  pip config list 2>/dev/null | python3 -c '
import re, sys
merged = {}
for line in sys.stdin:
    m = re.match(r"^([^=]+?)\.([^.=]+)=(.*)$", line.strip())
    if not m:
        continue
    section, key, value = m.groups()
    value = value[1:-1] if value[:1] in "\x27\"" and value[-1:] == value[:1] else value
    section = "global" if section == ":env:" else section
    merged[(section, key)] = value
for (section, key), value in merged.items():
    print(f"{section}.{key}={value}")
'
}
# Local paths named by those settings: files are copied into the base, folders bind-mounted.
pip_local_paths() {
  pip_settings | while IFS= read -r line; do
    for word in ${line#*=}; do
      word="${word#file://}"
      case "$word" in /*) if [ -e "$word" ]; then echo "$word"; fi ;; esac
    done
  done | sort -u
}

# --- 1. the base image ------------------------------------------------------------------------------
if [ "${STANDIN_BASE:-1}" = 0 ]; then
  say "pulling the real python:3.11-slim"
  buildah pull docker.io/library/python:3.11-slim >/dev/null || fail "could not pull python:3.11-slim"
  buildah tag docker.io/library/python:3.11-slim "$BASE"
elif podman image exists "$BASE"; then
  if [ -n "$(podman image inspect --format "{{index .Labels \"$STANDIN_LABEL\"}}" "$BASE" 2>/dev/null)" ]; then
    say "reusing the STAND-IN base $BASE (Debian bookworm + python3 3.11, built earlier by this script; not the real python:3.11-slim)"
  else
    say "using the existing $BASE image"
  fi
else
  command -v debootstrap >/dev/null || fail "debootstrap is missing: apt-get install debootstrap"
  say "python:3.11-slim cannot be pulled here: building a STAND-IN base from Debian bookworm with debootstrap"
  say "(its python3 is 3.11 like python:3.11-slim's; it is imported as $BASE)"
  root="$(mktemp -d /var/tmp/bertviz-base.XXXXXX)"
  trap 'rm -rf "$root"' EXIT
  t0=$(now)
  nice -n "$NICE" debootstrap --variant=minbase \
    --include=python3,python3-pip,python3-venv,passwd,ca-certificates bookworm "$root" "$MIRROR" \
    > "$root.debootstrap.log" 2>&1 || { tail -20 "$root.debootstrap.log" >&2; fail "debootstrap failed (log: $root.debootstrap.log)"; }
  rm -f "$root.debootstrap.log"
  ln -sf /usr/bin/python3 "$root/usr/local/bin/python"
  ln -sf /usr/bin/pip3 "$root/usr/local/bin/pip"
  rm -f "$root"/usr/lib/python3*/EXTERNALLY-MANAGED
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  [ -f /etc/ssl/certs/ca-certificates.crt ] && cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
  # This machine's pip settings, merged into the base's /etc/pip.conf; the files they name copied in.
  settings="$(pip_settings)"
  if [ -n "$settings" ]; then
    python3 -c '
import configparser, sys
cfg = configparser.ConfigParser()
for line in sys.stdin.read().splitlines():
    name, value = line.split("=", 1)
    section, key = name.split(".", 1)
    cfg.setdefault(section, {})
    cfg[section][key] = value
with open(sys.argv[1], "w") as f:
    cfg.write(f)
' "$root/etc/pip.conf" <<< "$settings"
    say "copied this machine's pip settings into the base's /etc/pip.conf:"
    sed 's/^/    /' "$root/etc/pip.conf"
    pip_local_paths | while IFS= read -r p; do
      if [ -f "$p" ]; then mkdir -p "$root$(dirname "$p")"; cp "$p" "$root$p"; fi
    done
  fi
  tar -C "$root" -c . | podman import \
    --change 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' --change "LABEL $STANDIN_LABEL=debootstrap-bookworm" \
    --change 'CMD ["python3"]' - "$BASE" >/dev/null || fail "podman import of the stand-in base failed"
  rm -rf "$root"; trap - EXIT
  say "stand-in base imported as $BASE in $(secs "$t0" "$(now)") s"
fi

# --- 2. the image -----------------------------------------------------------------------------------
volumes=()
while IFS= read -r p; do
  # A file:// index's pages link to files beside its simple/ folder (../../files/...): mount its parent.
  if [ -d "$p" ]; then [ "$(basename "$p")" = simple ] && p="$(dirname "$p")"; volumes+=(--volume "$p:$p:ro"); fi
done < <(pip_local_paths)
[ ${#volumes[@]} = 0 ] || say "bind-mounting pip's local folders into the build: ${volumes[*]}"
build_args=(--build-arg "TORCH=$torch")
torch_version=$(sed -n 's/^torch==\([^ #]*\).*/\1/p' requirements.txt | head -1)
[ -n "$torch_version" ] || fail "requirements.txt has no torch==<version> line"
if [ -n "${TORCH_CPU_INDEX+set}" ]; then
  build_args+=(--build-arg "TORCH_CPU_INDEX=$TORCH_CPU_INDEX")
  say "torch's CPU wheel from TORCH_CPU_INDEX='$TORCH_CPU_INDEX' (empty: pip's own sources)"
elif [ "$torch" = cpu ] \
    && [ -n "$(podman image inspect --format "{{index .Labels \"$STANDIN_LABEL\"}}" "$BASE" 2>/dev/null)" ]; then
  local_wheel=$(pip_local_paths | while IFS= read -r p; do
    [ -d "$p" ] && ls "$p"/torch-"$torch_version"+cpu-*.whl 2>/dev/null; done | head -1 || true)
  if [ -n "$local_wheel" ]; then
    build_args+=(--build-arg "TORCH_CPU_INDEX=")
    say "torch's CPU wheel from this machine's pip sources ($local_wheel), not torch's CPU index"
  fi
fi
if [ "$build" = 0 ]; then
  podman image exists "$IMAGE" || fail "--no-build: there is no $IMAGE to check (build it first: drop --no-build)"
  say "--no-build: checking the $IMAGE built earlier ($(buildah inspect --type image --format '{{.Docker.Created}}' "$IMAGE"))"
  build_s=""
else
  say "building $IMAGE from ./Dockerfile with TORCH=$torch (buildah bud --isolation chroot; pip installs torch, then the default model is trained: minutes)"
  build_log="$(mktemp /var/tmp/bertviz-build.XXXXXX.log)"
  old_id=$(buildah images --noheading --format '{{.ID}}' "$IMAGE" 2>/dev/null | head -1 || true)
  t0=$(now)
  # --format docker keeps the HEALTHCHECK (OCI images have none); --force-rm: no container left by a failed step.
  if ! nice -n "$NICE" buildah bud --isolation chroot --pull=never --layers --force-rm --format docker \
      "${no_cache[@]}" "${volumes[@]}" "${build_args[@]}" -t "$IMAGE" -f Dockerfile . 2>&1 | tee "$build_log"; then
    fail "buildah bud failed (full log: $build_log)"
  fi
  build_s=$(secs "$t0" "$(now)")
  say "built $IMAGE in $build_s s (log: $build_log)"
  new_id=$(buildah images --noheading --format '{{.ID}}' "$IMAGE" | head -1)
  if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then  # the previous check's image, untagged now
    buildah rmi "$old_id" >/dev/null 2>&1 && say "removed the previous $IMAGE ($old_id)"
  fi
fi

# --- 3. run it as uid 1000 --------------------------------------------------------------------------
ctr=""; app_pid=""
descendants() {  # the pids started, directly or not, by process $1
  local child
  for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do echo "$child"; descendants "$child"; done
}
app_pids() {  # the app's python process(es) inside buildah run, by pid
  local p
  for p in $(descendants "$app_pid"); do
    # the python itself, not buildah-chroot-exec (whose arguments name it too): a SIGTERM there is a SIGKILL below
    ps -o args= -p "$p" 2>/dev/null | grep -Eq '^ *([^ ]*/)?python3? app\.py' && echo "$p"
  done
}
cleanup() {
  set +e
  if [ -n "$app_pid" ] && kill -0 "$app_pid" 2>/dev/null; then
    # Like `docker stop`: SIGTERM to the app itself (it exits like Ctrl-C), buildah run then ends by itself.
    # Then anything this script started that is still alive, by pid.
    pids="$app_pid $(descendants "$app_pid" | tr '\n' ' ')"
    # shellcheck disable=SC2046
    kill -TERM $(app_pids) 2>/dev/null
    for i in $(seq 1 40); do
      alive=""
      for p in $pids; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
      [ -z "$alive" ] && break
      # shellcheck disable=SC2086
      [ "$i" = 20 ] && kill -TERM $alive 2>/dev/null
      sleep 0.5
    done
    # shellcheck disable=SC2086
    [ -n "$alive" ] && kill -KILL $alive 2>/dev/null
    wait "$app_pid" 2>/dev/null
  fi
  if [ -n "$ctr" ]; then
    buildah rm "$ctr" >/dev/null && say "stopped the app and removed the working container $ctr"
  fi
}
trap cleanup EXIT

code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 "http://127.0.0.1:$PORT/" || true)
[ "$code" = 000 ] || fail "something already answers on port $PORT (HTTP $code): stop it or run with PORT=<a free port>"

ctr=$(buildah from --pull=never --name "bertviz-check-$$" "$IMAGE") || fail "buildah from $IMAGE failed"
[ "$PORT" = 7860 ] || buildah config --env "BERTVIZ_PORT=$PORT" "$ctr"
in_ctr() { buildah run --isolation chroot --user 1000:1000 "$ctr" -- "$@"; }
torch_in_image=$(in_ctr python -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)' 2>&1 | tail -1) \
  || fail "torch does not import in the image: $torch_in_image"
case "$torch:$torch_in_image" in
  # PyPI's CUDA wheel is version 2.13.0 to pip, while torch.__version__ names its CUDA: 2.13.0+cu130
  "cpu:$torch_version+cpu CUDA None"|"cuda:$torch_version"*" CUDA "[0-9]*) say "torch in the image: $torch_in_image" ;;
  *) fail "the TORCH=$torch image has torch $torch_in_image, not the $torch build of $torch_version" ;;
esac
in_ctr sh -c 'test -f models/default/config.json && ls models/default | grep -q safetensors' \
  || fail "models/default is not in the image (the build's --build-model did not leave it)"
in_ctr sh -c 'test -f models/default-tagger/config.json && ls models/default-tagger | grep -q safetensors' \
  || fail "models/default-tagger is not in the image (the build's --build-model did not leave it)"
in_ctr sh -c 'mkdir -p models/runs && touch models/runs/.write-check && rm models/runs/.write-check' \
  || fail "uid 1000 cannot write models/runs in the image"
say "as uid 1000: models/default and models/default-tagger are in the image and models/runs is writable"

app_log="$(mktemp /var/tmp/bertviz-app.XXXXXX.log)"
say "starting python app.py in the container as uid 1000 (log: $app_log)"
t0=$(now)
setsid nice -n "$NICE" buildah run --isolation chroot --user 1000:1000 "$ctr" -- python app.py > "$app_log" 2>&1 &
app_pid=$!
first_s=""; page_s=""; predict_s=""; answer=""
deadline=$(( $(date +%s) + START_TIMEOUT ))
while [ -z "$predict_s" ]; do
  kill -0 "$app_pid" 2>/dev/null || { tail -30 "$app_log" >&2; fail "the app exited before it answered /v1/predict"; }
  [ "$(date +%s)" -le "$deadline" ] || { tail -30 "$app_log" >&2; fail "no answer from /v1/predict within $START_TIMEOUT s"; }
  if [ -z "$page_s" ]; then
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$PORT/" || true)
    [ "$code" != 000 ] && [ -z "$first_s" ] && first_s=$(secs "$t0" "$(now)") && say "first answer (HTTP $code) after $first_s s"
    [ "$code" = 200 ] && page_s=$(secs "$t0" "$(now)") && say "the page answers 200 on port $PORT after $page_s s"
  fi
  if [ -n "$page_s" ]; then
    answer=$(curl -s --max-time 60 -w '\n%{http_code}' -X POST "http://127.0.0.1:$PORT/v1/predict" \
               -H 'Content-Type: application/json' -d "{\"text\": \"$SENTENCE\"}" || true)
    if [ "${answer##*$'\n'}" = 200 ]; then
      predict_s=$(secs "$t0" "$(now)")
      answer="${answer%$'\n'*}"
      break
    fi
  fi
  sleep 0.5
done
python3 -c '
import json, sys
a = json.loads(sys.argv[1])
assert isinstance(a.get("label"), str) and a["label"] in a["scores"], a
assert abs(sum(a["scores"].values()) - 1) < 1e-3, a
' "$answer" || fail "/v1/predict answered 200 but not a classification: $answer"
say "POST /v1/predict answered after $predict_s s: $answer"
grep -q "the default model is built" "$app_log" \
  || fail "the app did not find the image's default model at start-up (see $app_log)"
tagged=$(curl -s --max-time 60 -w '\n%{http_code}' -X POST "http://127.0.0.1:$PORT/v1/tag" \
           -H 'Content-Type: application/json' -d '{"text": "Barack Obama visited London on Monday.", "model": "default-tagger"}' || true)
[ "${tagged##*$'\n'}" = 200 ] || fail "POST /v1/tag on default-tagger did not answer 200: $tagged"
tagged="${tagged%$'\n'*}"
python3 -c '
import json, sys
t = json.loads(sys.argv[1])
assert isinstance(t.get("entities"), list) and t["entities"], t
assert all(t["text"][e["start"]:e["end"]] == e["text"] for e in t["entities"]), t
' "$tagged" || fail "/v1/tag answered 200 but found no entity with offsets into the text: $tagged"
say "POST /v1/tag on the image's default tagger: $tagged"
if grep -q "building the default tagger" "$app_log"; then fail "the app rebuilt the default tagger at start-up"; fi
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "http://127.0.0.1:$PORT/" || true)
[ "$code" = 200 ] || fail "the page stopped answering (HTTP $code)"
uids=$(for p in $(app_pids); do awk '/^Uid:/ { print $2 }' "/proc/$p/status"; done | sort -u | tr '\n' ' ')
[ "$uids" = "1000 " ] || fail "the app's python process runs as uid '${uids% }', not 1000"
say "the app runs as uid 1000"
if [ "$PORT" = 7860 ]; then  # the image's HEALTHCHECK command, run inside the container as Docker would
  health=$(buildah inspect --type image "$IMAGE" | python3 -c '
import json, sys
test = json.load(sys.stdin)["Docker"]["config"]["Healthcheck"]["Test"]
print(test[1] if test[0] == "CMD-SHELL" else " ".join(test[1:]))')
  in_ctr sh -c "$health" || fail "the image's HEALTHCHECK fails while the app serves: $health"
  say "the image's HEALTHCHECK passes"
fi

# --- 4. size and summary ----------------------------------------------------------------------------
size=$(buildah images --format '{{.Size}}' "$IMAGE" | head -1)
base_size=$(buildah images --format '{{.Size}}' "$BASE" | head -1)
say "image $IMAGE: $size (base $BASE: $base_size)"
cat <<EOF
== container check passed ==
image size:                     $size (TORCH=$torch: torch $torch_in_image)
build time:                     $([ -z "$build_s" ] && echo "not built (--no-build)" || echo "$build_s s")$([ -n "$build_s" ] && [ ${#no_cache[@]} = 0 ] && echo " (cached layers reused where unchanged; --no-cache for a full build)")
cold start to first answer:     $first_s s (start-up placeholder, HTTP 503)
cold start to the page (200):   $page_s s
cold start to first prediction: $predict_s s
EOF
