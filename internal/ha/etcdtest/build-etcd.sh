#!/usr/bin/env bash
# Builds the etcd server binary of etcdtest.Version into
# $WEIR_ETCD_CACHE/<version>/etcd (default ~/.cache/weir/etcd), for the
# real-process test of internal/ha. go install cannot build it by path
# (go.etcd.io/etcd/server/v3's go.mod has replace directives), so it is
# built from a scratch module that requires it. About 2-4 minutes on two
# cores; nothing to do when the binary is there.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version=$(sed -n 's/^const Version = "\(.*\)"/\1/p' "$here/etcdtest.go")
cache="${WEIR_ETCD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/weir/etcd}"
out="$cache/$version/etcd"
if [ -x "$out" ]; then
	echo "etcd $version is at $out"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
export GOWORK=off GOFLAGS=-mod=mod
go mod init weir-etcd-build >/dev/null 2>&1
go get "go.etcd.io/etcd/server/v3@$version" >/dev/null
mkdir -p "$(dirname "$out")"
go build -o "$out" go.etcd.io/etcd/server/v3
echo "built etcd $version at $out"
