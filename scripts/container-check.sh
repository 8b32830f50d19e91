#!/usr/bin/env bash
# Build the image and prove it works: healthy, draws its heatmaps in Chromium, non-root, offline, doctor passes.
# Uses docker where a Docker engine answers, else podman (on machines like ours: ../shared/tools).
set -euo pipefail
cd "$(dirname "$0")/.."
TAG=${TAG:-attnviz}
NAME=attnviz-check
PORT=8501
PY=${PY:-.venv/bin/python}

if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
  ENGINE=(docker); BUILD=(docker build -t "$TAG" .); NET=(-p "127.0.0.1:$PORT:8501")
elif [ -x ../shared/tools/podman ]; then
  # --format docker: podman's default OCI format drops the HEALTHCHECK instruction
  ENGINE=(../shared/tools/podman); BUILD=(../shared/tools/container-build "$TAG" --format docker); NET=(--network host)
elif command -v podman >/dev/null 2>&1; then
  ENGINE=(podman); BUILD=(podman build --format docker -t "$TAG" .); NET=(-p "127.0.0.1:$PORT:8501")
else
  echo "container-check: no Docker engine and no podman here" >&2; exit 1
fi
echo "== engine: ${ENGINE[*]}"

echo "== build"
"${BUILD[@]}"
size=$("${ENGINE[@]}" image inspect "$TAG" --format '{{.Size}}')

cleanup() { "${ENGINE[@]}" rm -f -v "$NAME" >/dev/null 2>&1 || true; }
trap cleanup EXIT
cleanup

echo "== run"
# a server already on the port (`make run` left going) answered the health check and the browser in the image's stead,
# while the container, whose server could not bind the port on the host's network, had exited
if curl -fs -o /dev/null "http://127.0.0.1:$PORT/" 2>/dev/null; then
  echo "container-check: something already answers on port $PORT (a \`make run\`?): stop it first" >&2; exit 1
fi
start=$(date +%s.%N)
"${ENGINE[@]}" run -d --name "$NAME" "${NET[@]}" "$TAG" >/dev/null
for _ in $(seq 240); do
  if [ "$(curl -fs "http://127.0.0.1:$PORT/_stcore/health" 2>/dev/null)" = ok ]; then break; fi
  sleep 0.5
done
[ "$(curl -fs "http://127.0.0.1:$PORT/_stcore/health")" = ok ] || { "${ENGINE[@]}" logs "$NAME"; exit 1; }
running=$("${ENGINE[@]}" inspect -f '{{.State.Running}}' "$NAME")
[ "$running" = true ] || { echo "the container is not running:" >&2; "${ENGINE[@]}" logs "$NAME"; exit 1; }
healthy=$(echo "$(date +%s.%N) - $start" | bc)
if [ "${ENGINE[0]}" = docker ]; then
  for _ in $(seq 60); do [ "$(docker inspect -f '{{.State.Health.Status}}' "$NAME")" = healthy ] && break; sleep 1; done
  status=$(docker inspect -f '{{.State.Health.Status}}' "$NAME")
else
  status=$("${ENGINE[@]}" healthcheck run "$NAME" >/dev/null 2>&1 && echo healthy || echo unhealthy)
fi
echo "HEALTHCHECK: $status"
[ "$status" = healthy ] || { echo "the image's HEALTHCHECK did not pass" >&2; exit 1; }

echo "== the Heads page in Chromium"
"$PY" scripts/browser_check.py "http://127.0.0.1:$PORT/"

echo "== user"
uid=$("${ENGINE[@]}" exec "$NAME" id -u)
server_uid=$("${ENGINE[@]}" exec "$NAME" sh -c "awk '/^Uid:/ {print \$2}' /proc/1/status")
echo "exec uid: $uid, server (pid 1) uid: $server_uid"
[ "$uid" != 0 ] && [ "$server_uid" != 0 ] || { echo "the server runs as root" >&2; exit 1; }

echo "== doctor inside the running container"
doctor=$("${ENGINE[@]}" exec "$NAME" python -m attnviz doctor)
echo "$doctor"
# long texts' statistics by attnviz's CPU kernel (compiled at build), not the plain path a slim image without a C
# compiler took; and the app's user can compile it again (a host whose processor is not the build machine's)
grep -q "^long texts    the fused statistics pass" <<<"$doctor" || { echo "no fused pass in the image" >&2; exit 1; }
"${ENGINE[@]}" exec "$NAME" python -c "from attnviz import cpu_kernel as c
t = c._target().with_name('probe.so'); c._compile(t); t.unlink(); print('the app user compiles the CPU kernel:', t.parent)"

echo "== no network at all: a fresh container with --network none computes attention"
"${ENGINE[@]}" run --rm --network none "$TAG" \
  python -m attnviz attention "No network is needed to see attention." --engine scratch
"${ENGINE[@]}" run --rm --network none "$TAG" \
  python -m attnviz attention "A decoder reads left to right." --model smollm2 --backend scratch
"${ENGINE[@]}" run --rm --network none "$TAG" \
  python -m attnviz attention "Sliding windows, one shared key and value head." --model gemma3

echo "== two replicas, one PostgreSQL, a sticky proxy (compose.yaml)"
COMPOSE=(); UP=(up -d --build)
if "${ENGINE[@]}" compose version >/dev/null 2>&1; then
  COMPOSE=("${ENGINE[@]}" compose -p attnviz-check)
elif [ "${ENGINE[0]}" != docker ] && PODMAN_COMPOSE=$(command -v podman-compose || ls "$(dirname "$PY")/podman-compose" 2>/dev/null); then
  COMPOSE=("$PODMAN_COMPOSE" --podman-path "$(cd "$(dirname "${ENGINE[0]}")" && pwd)/$(basename "${ENGINE[0]}")" -p attnviz-check)
fi
if [ "${ENGINE[0]}" = ../shared/tools/podman ] && [ ${#COMPOSE[@]} -gt 0 ]; then
  # no registry here: stand-ins for postgres:15 and caddy:2, and the image built above (with the machine's wheels)
  scripts/compose-standins.sh "${ENGINE[@]}"
  [ "$TAG" = attnviz ] || "${ENGINE[@]}" tag "$TAG" attnviz
  UP=(up -d --no-build)
fi
if [ ${#COMPOSE[@]} -gt 0 ]; then
  ATTNVIZ_DB_PASSWORD=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n'); export ATTNVIZ_DB_PASSWORD
  echo "compose: ${COMPOSE[*]}"
  trap '"${COMPOSE[@]}" down -v >/dev/null 2>&1 || true; cleanup' EXIT
  "${COMPOSE[@]}" "${UP[@]}"
  for _ in $(seq 240); do
    [ "$(curl -fs http://127.0.0.1:8080/_stcore/health 2>/dev/null)" = ok ] && break; sleep 0.5
  done
  [ "$(curl -fs http://127.0.0.1:8080/_stcore/health)" = ok ] || { "${COMPOSE[@]}" logs; exit 1; }
  curl -s -D - -o /dev/null http://127.0.0.1:8080/ | grep -qi '^set-cookie: attnviz_replica=' \
    || { echo "the proxy set no sticky cookie" >&2; exit 1; }
  cookie=$(curl -s -D - -o /dev/null http://127.0.0.1:8080/ | tr -d '\r' | awk -F'[ ;]' 'tolower($1) == "set-cookie:" {print $2}')
  for _ in 1 2 3 4 5; do  # a browser that carries the cookie is kept where it is: no new cookie
    ! curl -s -D - -o /dev/null -H "Cookie: $cookie" http://127.0.0.1:8080/ | grep -qi '^set-cookie: attnviz_replica=' \
      || { echo "the proxy moved a browser that carried its cookie" >&2; exit 1; }
  done
  "$PY" scripts/browser_check.py http://127.0.0.1:8080/  # the page and its websocket through the proxy
  code=$("${COMPOSE[@]}" exec -T app1 python -m attnviz class create --base-url http://localhost:8080 \
         | awk 'NR == 1 {sub(",", "", $2); print $2}')
  seen=$("${COMPOSE[@]}" exec -T app2 python -c \
         "import sys; from attnviz.liveclass.store import Store; print(Store().get(sys.argv[1]).code)" "$code")
  [ "$seen" = "$code" ] || { echo "a class made on app1 ($code) is not seen by app2 ($seen)" >&2; exit 1; }
  echo "class $code made on app1, seen by app2 through PostgreSQL; the proxy keeps a browser on one replica"
  "${COMPOSE[@]}" down -v
else
  echo "(no 'compose' for ${ENGINE[*]} and no podman-compose here: the replicas check did not run)"
fi

echo "== summary"
echo "image size: $(echo "scale=1; $size / 1048576" | bc) MiB"
echo "run to healthy: ${healthy} s"
