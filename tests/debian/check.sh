#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check.sh SRCDIR OUTDIR - the Debian packages, as a user gets them: build
# them from a copy of SRCDIR's files (dpkg-buildpackage -us -uc -b, in
# OUTDIR), run lintian (errors fail), install them, check that the manual
# pages and --help are there, then build and run the README's example
# (the code under "Example (examples/hello.c)") in a directory outside the
# tree with nothing but cc and pkg-config: against the installed packages
# alone; and, on a throw-away etcd member, that the packaged library
# spawns the packaged etcd guard, which passes a SIGKILLed holder's lock
# on within seconds. The packages are purged again at the end. One line
# per step,
# "debian: STEP: PASS|FAIL ...", then "N passed, N failed" (tests/run.sh
# adds it to its totals). Installs what it needs with apt-get.
set -uo pipefail

srcdir=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
jobs=${JOBS:-$(nproc)}
passed=0
failed=0
packages=(libweblocks1 libweblocks-dev weblocks-tools)

result() {	# STEP PASS|FAIL [DETAIL]
	echo "debian: $1: $2${3:+ ($3)}"
	if [[ $2 == PASS ]]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
	fi
}

finish() {
	echo "$passed passed, $failed failed"
	exit $((failed > 0))
}

if ! command -v dpkg-buildpackage >/dev/null; then
	echo "check.sh: not a Debian system: no packages to build"
	finish
fi
sudo=()
[[ $(id -u) -eq 0 ]] || sudo=(sudo)

# What building, checking and installing the packages needs, beside the
# build dependencies tests/deps.sh installs.
deps_who=debian/check.sh
# shellcheck source=tests/deps.sh
source "$srcdir/tests/deps.sh"
deps_packages=(build-essential debhelper dpkg-dev fakeroot lintian man-db
	liburcu-dev pkg-config)
install_missing

# 1. Build, from the tracked files (and new ones not ignored): none of the
# files autoreconf or a build left in SRCDIR.
rm -rf "$out/src" "$out"/*.deb "$out"/*.changes "$out"/*.buildinfo
mkdir -p "$out/src"
if git -C "$srcdir" rev-parse --git-dir >/dev/null 2>&1; then
	git -C "$srcdir" ls-files -z -c -o --exclude-standard |
		(cd "$srcdir" && tar --null -T - -cf -) | tar -x -C "$out/src"
else
	tar -C "$srcdir" --exclude='./build*' -cf - . | tar -x -C "$out/src"
fi
if (cd "$out/src" && DEB_BUILD_OPTIONS="parallel=$jobs" \
	dpkg-buildpackage -us -uc -b) >"$out/build.log" 2>&1; then
	result "dpkg-buildpackage -us -uc -b" PASS \
		"$(cd "$out" && echo *.deb)"
else
	result "dpkg-buildpackage -us -uc -b" FAIL "see $out/build.log"
	tail -n 40 "$out/build.log"
	finish
fi

# 2. lintian: errors fail; warnings are counted.
changes=$(echo "$out"/*.changes)
lintian --fail-on error "$changes" >"$out/lintian.log" 2>&1
rc=$?
errors=$(grep -c '^E: ' "$out/lintian.log")
warnings=$(grep -c '^W: ' "$out/lintian.log")
cat "$out/lintian.log"
if ((rc == 0 && errors == 0)); then
	result lintian PASS "$errors errors, $warnings warnings"
else
	result lintian FAIL "$errors errors, $warnings warnings, exit $rc"
fi

# 3. Install the three packages (not their debug symbols).
debs=()
for p in "${packages[@]}"; do
	debs+=("$(echo "$out/${p}_"*.deb)")
done
# shellcheck disable=SC2317 # called by the traps
purge() {
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
		apt-get purge -y -q "${packages[@]}" >"$out/purge.log" 2>&1
}
trap purge EXIT
if "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
	apt-get install -y -q --reinstall "${debs[@]}" >"$out/install.log" 2>&1; then
	result "install ${packages[*]}" PASS
else
	result "install ${packages[*]}" FAIL "see $out/install.log"
	tail -n 20 "$out/install.log"
	finish
fi

# 4. The manuals and --help. A system whose dpkg configuration leaves out
# /usr/share/man (minimal container images) gets no page from any
# package: then the packages' own lists must name them.
missing=()
for page in wlk_acquire.3 weblocks.7 shm-inspect.1 weblocks-run.1; do
	name=${page%.*}
	if ! man -w "${page##*.}" "$name" >/dev/null 2>&1 &&
		! for d in "${debs[@]}"; do dpkg-deb -c "$d"; done |
		grep -q "/$page.gz$"; then
		missing+=("$page")
	fi
done
if ((${#missing[@]} == 0)) && weblocks-run --help >/dev/null &&
	shm-inspect --help >/dev/null; then
	result "man wlk_acquire, weblocks, shm-inspect, weblocks-run; --help" PASS
else
	result "man wlk_acquire, weblocks, shm-inspect, weblocks-run; --help" \
		FAIL "missing: ${missing[*]:-none}; or --help failed"
fi

# 5. The README's example, outside the tree, against the packages alone.
tmp=$(mktemp -d)
trap 'purge; rm -rf "$tmp"' EXIT
sed -n '/^Example (examples\/hello.c)$/,/^Build it with:/p' \
	"$srcdir/README" | sed -n 's/^    //p' >"$tmp/hello.c"
build=$(sed -n 's/^Build it with: *//p' "$srcdir/README" | head -n 1)
libdir=$(env -u PKG_CONFIG_PATH pkg-config --variable=libdir weblocks 2>&1)
if [[ ! -s $tmp/hello.c || $build != "cc hello.c "* ]]; then
	result "README example" FAIL "no example or build line in README"
elif [[ $libdir != /usr/lib* ]]; then
	result "README example" FAIL "pkg-config finds weblocks in '$libdir'"
elif ! (cd "$tmp" && env -u PKG_CONFIG_PATH -u LD_LIBRARY_PATH \
	bash -c "$build -o hello") >"$out/example.log" 2>&1; then
	result "README example" FAIL "'$build' failed: $(tail -n 5 "$out/example.log")"
elif so=$(ldd "$tmp/hello" | awk '$1 == "libweblocks.so.1" { print $3 }') &&
	[[ -z $so || $(readlink -f "$so") != \
		$(readlink -f "$libdir/libweblocks.so.1") ]]; then
	result "README example" FAIL "linked to '$so', not $libdir's"
elif ! env -u LD_LIBRARY_PATH "$tmp/hello" >>"$out/example.log" 2>&1 ||
	! grep -q 'holding "my_resource"' "$out/example.log"; then
	result "README example" FAIL "$(tail -n 5 "$out/example.log")"
else
	result "README example: $build" PASS "$(tail -n 1 "$out/example.log")"
fi

# 6. The packaged etcd engine: the installed library spawns the packaged
# guard, which passes a SIGKILLed holder's lock on long before its lease's
# TTL (60 s here). On a throw-away cluster (tests/etcd/cluster.sh); said,
# not counted, without etcd (CI installs it).
step="etcd: the packaged guard passes a killed holder's lock on"
guard=$(dpkg -L libweblocks1 | grep '/etcd-guard$')
if ! command -v etcd >/dev/null; then
	echo "debian: $step: not run: etcd is not installed (etcd-server)"
elif ! backend=$(bash "$srcdir/tests/etcd/cluster.sh" start "$tmp/etcd" \
	2>"$out/etcd.log"); then
	result "$step" FAIL "the cluster did not start: see $out/etcd.log"
else
	trap 'bash "$srcdir/tests/etcd/cluster.sh" stop "$tmp/etcd"; purge;
		rm -rf "$tmp"' EXIT
	# The installed library and its default guard; env execs
	# weblocks-run, so $! below is weblocks-run's pid.
	wrun=(env -u LD_LIBRARY_PATH -u WEBLOCKS_ETCD_GUARD
		WEBLOCKS_BACKEND="$backend" WEBLOCKS_ETCD_TTL=60 weblocks-run)
	"${wrun[@]}" https://deb.example g sleep 60 &
	holder=$!
	for _ in $(seq 100); do	# until the holder holds: 75, unavailable
		"${wrun[@]}" -n -q https://deb.example g true
		[[ $? == 75 ]] && break
		sleep 0.1
	done
	guards=$(pgrep -c -f "^$guard ")
	kill -9 "$holder"
	{ wait "$holder"; } 2>/dev/null	# without bash's "Killed" line
	start=$(date +%s%N)
	"${wrun[@]}" -w 10 https://deb.example g true
	rc=$? took=$((($(date +%s%N) - start) / 1000000))
	if [[ -z $guard || $guards != 1 ]]; then
		result "$step" FAIL "guard '$guard': $guards running"
	elif ((rc != 0 || took > 5000)); then
		result "$step" FAIL "the waiter: exit $rc after $took ms"
	else
		result "$step" PASS "$guard; granted $took ms after the kill"
	fi
	# The holder's sleep got SIGTERM when weblocks-run died (its
	# PR_SET_PDEATHSIG): nothing of this step is left running.
fi
finish
