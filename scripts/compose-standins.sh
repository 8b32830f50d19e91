#!/usr/bin/env bash
# Local stand-ins for the two images compose.yaml pulls, postgres:15 and caddy:2, on a machine that reaches no image
# registry (as ../shared/tools/container-base.sh makes one for python:3.11-slim, which these start from). Each is
# Debian bookworm with Debian's own package (postgresql-15; caddy 2.6) and keeps the official image's contract as far
# as compose.yaml uses it:
#   postgres:15  POSTGRES_USER / POSTGRES_PASSWORD / POSTGRES_DB make a superuser, its password (checked from other
#                hosts) and a database on first start in /var/lib/postgresql/data; pg_isready on PATH; not root.
#   caddy:2      caddy runs /etc/caddy/Caddyfile.
# Where an image by that name is already present (a real one, or a stand-in built before) it is left alone.
# Usage: scripts/compose-standins.sh ENGINE...   e.g. scripts/compose-standins.sh ../shared/tools/podman
set -euo pipefail
ENGINE=("$@")
[ ${#ENGINE[@]} -gt 0 ] || { echo "usage: $0 ENGINE..." >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! "${ENGINE[@]}" image exists docker.io/library/postgres:15; then
  mkdir "$work/postgres"
  cat > "$work/postgres/entrypoint.sh" <<'EOF'
#!/bin/sh
# The stand-in's entrypoint: the first start makes the cluster, the user, the password and the database.
set -eu
: "${POSTGRES_PASSWORD:?the postgres stand-in needs POSTGRES_PASSWORD}"
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }
mkdir -p "$PGDATA" /run/postgresql
chown -R postgres:postgres "$PGDATA" /run/postgresql
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
  chown postgres "$pwfile"
  as_postgres initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" --auth-host=scram-sha-256 --auth-local=trust \
    -E UTF8 --locale=C.UTF-8 >/dev/null  # the official image: a UTF-8 locale
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  if [ "$db" != postgres ]; then
    echo "CREATE DATABASE \"$db\" OWNER \"$user\";" | as_postgres postgres --single -D "$PGDATA" postgres >/dev/null
  fi
  echo "postgres stand-in: made user $user and database $db"
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups postgres -D "$PGDATA" -c listen_addresses='*'
EOF
  cat > "$work/postgres/Containerfile" <<'EOF'
FROM docker.io/library/python:3.11-slim
RUN apt-get update -q && apt-get install -y -q --no-install-recommends postgresql-15 >/dev/null \
 && rm -rf /var/lib/apt/lists/* /var/lib/postgresql/15
COPY entrypoint.sh /usr/local/bin/postgres-standin
ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin PGDATA=/var/lib/postgresql/data
EXPOSE 5432
ENTRYPOINT ["sh", "/usr/local/bin/postgres-standin"]
EOF
  "${ENGINE[@]}" build --pull=never --network host -t docker.io/library/postgres:15 "$work/postgres"
  echo "stand-in postgres:15 ready"
else
  echo "postgres:15 already present"
fi

if ! "${ENGINE[@]}" image exists docker.io/library/caddy:2; then
  mkdir "$work/caddy"
  cat > "$work/caddy/Containerfile" <<'EOF'
FROM docker.io/library/python:3.11-slim
RUN apt-get update -q && apt-get install -y -q --no-install-recommends caddy >/dev/null && rm -rf /var/lib/apt/lists/*
EXPOSE 80
CMD ["caddy", "run", "--config", "/etc/caddy/Caddyfile", "--adapter", "caddyfile"]
EOF
  "${ENGINE[@]}" build --pull=never --network host -t docker.io/library/caddy:2 "$work/caddy"
  echo "stand-in caddy:2 ready"
else
  echo "caddy:2 already present"
fi
