# SPDX-License-Identifier: MIT
# deps.sh - sourced by examples/demo.sh and tests/run.sh: install the
# Debian packages the build, the tests and the examples need, only those
# missing (libuv1-dev is only for examples/libuv, spin for the model check
# in tests/model, libcurl4-openssl-dev and libjson-c-dev for the etcd
# engine, etcd-server and curl for its tests' cluster). $deps_who names
# the caller in messages.

deps_packages=(build-essential autoconf automake libtool pkg-config
	liburcu-dev libcriterion-dev libuv1-dev spin
	libcurl4-openssl-dev libjson-c-dev etcd-server curl)

install_missing() {
	local missing=() p sudo=() who=${deps_who:-deps}

	if ! command -v dpkg-query >/dev/null; then
		echo "$who: not a Debian system; make sure these are" \
			"installed: ${deps_packages[*]}" >&2
		return 0
	fi
	for p in "${deps_packages[@]}"; do
		# dpkg -s also succeeds for removed packages that left config.
		if [[ $(dpkg-query -W -f='${db:Status-Status}' "$p" \
			2>/dev/null) != installed ]]; then
			missing+=("$p")
		fi
	done
	[[ ${#missing[@]} -eq 0 ]] && return 0
	if [[ $(id -u) -ne 0 ]]; then
		command -v sudo >/dev/null || {
			echo "$who: need root or sudo to install:" \
				"${missing[*]}" >&2
			exit 1
		}
		sudo=(sudo)
	fi
	echo "$who: installing ${missing[*]}"
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -q "${missing[@]}"
}
