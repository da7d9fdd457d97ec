#!/bin/sh
# kopt under MPI on one host with two GPUs (docs/MPI.md), against today's
# single process on the same two GPUs, side by side:
#   1. one process, --gpus 0,1 (one worker process per GPU): the matmul sweep
#   2. mpirun -np 2, one GPU per rank (rank 0 evaluates too): the same sweep
#   3. the same under mpirun --enable-recovery with rank 1 killed (SIGKILL) at
#      its third chunk: the sweep must still evaluate every config
#   4. the replay MPI tests (tests/lua/test_mpi*.lua) with this Open MPI
# and prints configs/s of 1 and 2 with the ratio (the issue asks for MPI
# within 10 % of one process).
#
# Two steps, because the GPU machine (Ubuntu 24.04, x86-64) has no MPI and
# reaches no package registry:
#
#   tools/device_mpi.sh prepare    here (Debian 12 with apt): Open MPI 4.1 and
#                                  the libraries it needs, from Debian's
#                                  packages unpacked with dpkg -x into
#                                  .carry/ompi, and the kopt built with MPI
#                                  (BUILD, default build-mpi) as .carry/kopt-mpi
#   tools/device_mpi.sh            on the GPU machine, from the repo root, with
#                                  .carry/ompi and .carry/kopt-mpi carried;
#                                  results to OUT (default .)
#
# The carried Open MPI runs from its folder: OPAL_PREFIX (and the OPAL_*
# folders Debian puts outside /usr) relocate Open MPI, PMIX_INSTALL_PREFIX
# relocates PMIx, LD_LIBRARY_PATH finds the libraries before any others.
set -u
CARRY=${CARRY:-.carry}
OMPI_DIR=${OMPI_DIR:-$CARRY/ompi}
OMPI_PACKAGES="openmpi-bin openmpi-common libopenmpi3 libpmix2 libhwloc15 libevent-core-2.1-7
 libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1 librdmacm1 libnl-3-200 libnl-route-3-200
 libnuma1 libpsm2-2 libpsm-infinipath1 libmunge2 libxnvctrl0"

if [ "${1:-}" = prepare ]; then
	set -e
	BUILD=${BUILD:-build-mpi}
	debs=$(mktemp -d)
	# shellcheck disable=SC2086
	(cd "$debs" && apt-get download $OMPI_PACKAGES)
	rm -rf "$OMPI_DIR"
	mkdir -p "$OMPI_DIR"
	for f in "$debs"/*.deb; do dpkg -x "$f" "$OMPI_DIR"; done
	rm -rf "$debs" "$OMPI_DIR/usr/share/doc" "$OMPI_DIR/usr/share/man" "$OMPI_DIR/usr/share/lintian"
	# Debian's mpirun is an alternatives link made at install time
	ln -sf orterun "$OMPI_DIR/usr/bin/mpirun"
	cp "$BUILD/kopt" "$CARRY/kopt-mpi"
	du -sh "$OMPI_DIR" "$CARRY/kopt-mpi"
	exit 0
fi

P=$(cd "$OMPI_DIR/usr" 2>/dev/null && pwd) || { echo "no $OMPI_DIR: run tools/device_mpi.sh prepare where apt works, carry $CARRY/ompi" >&2; exit 2; }
L=$P/lib/x86_64-linux-gnu
export OPAL_PREFIX="$P" OPAL_EXEC_PREFIX="$P" OPAL_BINDIR="$P/bin" OPAL_LIBDIR="$L/openmpi/lib"
export OPAL_PKGLIBDIR="$L/openmpi/lib/openmpi3" OPAL_DATAROOTDIR="$P/share" OPAL_DATADIR="$P/share"
export OPAL_PKGDATADIR="$P/share/openmpi" OPAL_SYSCONFDIR="$(cd "$P/.." && pwd)/etc/openmpi"
export PMIX_INSTALL_PREFIX="$L/pmix2"
export PATH="$P/bin:$PATH"
export LD_LIBRARY_PATH="$L:$L/openmpi/lib:$L/pmix2/lib:$L/libfabric:$L/ucx${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# One host: shared memory between the ranks, no fabric probing.
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp OMPI_MCA_osc=^ucx
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Measurements, not memories: no run here is answered by the experience database.
export KOPT_DB=${KOPT_DB:-off}
K=${K:-$CARRY/kopt-mpi}
OUT=${OUT:-.}
RUNS=${RUNS:-/tmp/kopt-mpi-runs}
SPEC=${SPEC:-specs/matmul_f16.json}
rm -rf "$RUNS"
mkdir -p "$RUNS" "$OUT"
now() { date +%s.%N; }
rate() { python3 - "$1" "$2" <<'PY'
import json, sys
n = sum(1 for line in open(sys.argv[1]) if json.loads(line).get("event") == "eval")
print(f"{n} {n / float(sys.argv[2]):.2f}")
PY
}

mpirun --version | head -1
ldd "$K" | grep -E "mpi|not found"
"$K" devices

# each sweep with its own empty NVRTC cache, so both compile everything
echo "== 1. one process, two GPUs"
t0=$(now)
KOPT_CACHE_DIR="$RUNS/cache_single" "$K" exhaustive "$SPEC" --gpus 0,1 --out "$RUNS/single" -q >"$OUT/mpi_single.txt" 2>&1
echo "rc=$?"
t1=$(now)
single=$(rate "$RUNS/single/events.jsonl" "$(awk "BEGIN{print $t1 - $t0}")")
echo "single: evaluations configs/s = $single"

echo "== 2. mpirun -np 2, one GPU per rank"
t0=$(now)
mpirun -np 2 --bind-to none -x KOPT_CACHE_DIR="$RUNS/cache_mpi" "$K" exhaustive "$SPEC" --out "$RUNS/mpi" -q >"$OUT/mpi_two_ranks.txt" 2>&1
echo "rc=$?"
t1=$(now)
two=$(rate "$RUNS/mpi/events.jsonl" "$(awk "BEGIN{print $t1 - $t0}")")
echo "mpi: evaluations configs/s = $two"
tail -2 "$OUT/mpi_two_ranks.txt"

echo "== 3. mpirun --enable-recovery -np 2, rank 1 killed at its third chunk"
KOPT_TEST_MPI_FAULT=1:3:kill mpirun --enable-recovery -np 2 --bind-to none -x KOPT_CACHE_DIR="$RUNS/cache_kill" "$K" exhaustive "$SPEC" \
	--out "$RUNS/mpi_kill" >"$OUT/mpi_kill.txt" 2>&1
echo "rc=$?"
grep -E "lost|re-queued" "$OUT/mpi_kill.txt" | tr '\r' '\n' | grep -E "lost|re-queued"
killed=$(rate "$RUNS/mpi_kill/events.jsonl" 1)
echo "evaluations: single ${single%% *}, killed-rank run ${killed%% *} (equal: nothing lost)"

echo "== 4. the replay MPI tests with this Open MPI"
for t in test_mpi test_mpi_faults; do
	KOPT="$K" KOPT_SOURCE_DIR="$PWD" "$K" script "tests/lua/$t.lua" 2>&1 | tail -3
done

python3 - "$single" "$two" <<'PY' | tee "$OUT/mpi_figures.txt"
import sys
s, m = (float(a.split()[1]) for a in sys.argv[1:3])
print(f"matmul sweep configs/s: one process two GPUs {s:.2f}, MPI two ranks x one GPU {m:.2f}, ratio {m / s:.3f}")
PY
