#!/usr/bin/env bash
# AIM against packaged peers' AIM (benchmarks/peers/peers_bench.py). Each peer gets its own virtualenv
# under the cache folder (PEERS_CACHE, default .cache/peers), built once from PyPI with the peer's
# package; a peer whose install fails is reported by the benchmark, the others still run. Nothing here
# touches the project's own virtualenv or requirements. Extra arguments go to peers_bench.py.
set -u
cd "$(dirname "$0")/../.."
CACHE=${PEERS_CACHE:-.cache/peers}
PEER_PYTHON=${PEER_PYTHON:-python3}
OURS=${OURS_PYTHON:-.venv/bin/python}
mkdir -p "$CACHE"
for pair in smartnoise:smartnoise-synth dpmm:dpmm; do
	peer=${pair%%:*}; package=${pair#*:}
	venv=$CACHE/$peer
	[ -f "$venv/.installed" ] && continue
	echo "Installing $package into $venv (log: $CACHE/$peer.log) ..."
	if "$PEER_PYTHON" -m venv "$venv" >"$CACHE/$peer.log" 2>&1 \
		&& "$venv/bin/python" -m pip install "$package" >>"$CACHE/$peer.log" 2>&1; then
		touch "$venv/.installed"
	else
		echo "  $package did not install; the benchmark will report $peer as not installed."
	fi
done
exec "$OURS" benchmarks/peers/peers_bench.py --cache "$CACHE" "$@"
