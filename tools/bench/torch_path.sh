#!/usr/bin/env bash
# torch_path.sh [SIZES_MAX]: what the torch path costs over the daemon's own,
# on two loopback daemons of the build tree, 1 rank each, in one run:
#   - tools/bench/torch_layers.py: one all_reduce at each depth (the C call,
#     the backend, torch.distributed) for the native and the Python
#     backend, on CPU tensors and, with a GPU per rank, CUDA ones;
#   - mccl-perf --memory host, the daemon's own path for the same memory;
#   - gloo_allreduce.py's sweep from 1 KiB to SIZES_MAX (default 16 MiB)
#     through torch on backend mccl, CPU and CUDA tensors, and with a GPU
#     per rank NCCL over sockets (NCCL_NET=Socket, IB, P2P and shared
#     memory off: the two ranks talk as two hosts would).
# PYTHON (default /usr/bin/python3) runs torch; BUILD (default build/) holds
# mccld and mccl-perf.  Prints one report on stdout.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
PY=${PYTHON:-/usr/bin/python3}
B=${BUILD:-$top/build}
max=${1:-16777216}
dir=$(mktemp -d /tmp/mccl-torch-path.XXXXXX)
trap 'BUILD=$B "$top/tools/cluster.sh" stop "$dir" >/dev/null 2>&1; rm -rf "$dir"' EXIT
BUILD=$B "$top/tools/cluster.sh" start 2 "$dir" >/dev/null ||
    { echo "torch_path.sh: the daemons did not start" >&2; exit 1; }
. "$top/tools/ports.sh"
gpus=$("$PY" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null)

# two TAG VAR=VALUE... -- CMD...: CMD as ranks 0 and 1, each at its daemon
two() {
	local tag=$1 port i pids=()
	shift
	port=$(free_ports 1)
	for i in 0 1; do
		env MCCL_SOCKET="$dir/n$i.sock" RANK=$i LOCAL_RANK=$i \
		    WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
		    PYTHONPATH="$top/libclient/python" MCCL_LIBRARY="$B/libmccl.so.0" \
		    NCCL_NET=Socket NCCL_IB_DISABLE=1 NCCL_P2P_DISABLE=1 \
		    NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo \
		    timeout 300 env "$@" >"$dir/$tag.$i" 2>&1 &
		pids+=($!)
	done
	wait "${pids[@]}"
	echo "== $tag"
	grep -v '^# placement\|^# ranks' "$dir/$tag.0"
	grep -l 'Traceback' "$dir/$tag".? 2>/dev/null | head -n 1 |
	    xargs -r tail -n 3
}

two layers-native MCCL_TORCH_NATIVE=1 "$PY" "$here/torch_layers.py"
two layers-python MCCL_TORCH_NATIVE=0 "$PY" "$here/torch_layers.py"
for i in 0 1; do
	MCCL_SOCKET="$dir/n$i.sock" timeout 300 "$B/mccl-perf" --nprocs 1 \
	    --total 2 --first $i --job "torch-path-$$" -b 1024 -e "$max" -f 4 \
	    -n 200 --memory host >"$dir/perf.$i" 2>&1 &
done
wait
echo "== mccl-perf --memory host (in place, us)"
grep -v '^#' "$dir/perf.0" | awk '{ print $1, $10 }'
two cpu-native MCCL_TORCH_NATIVE=1 BENCH_BACKEND=mccl BENCH_DEVICE=cpu \
    "$PY" "$here/gloo_allreduce.py" 2 1024 "$max" 200
if [ "${gpus:-0}" -ge 2 ]; then
	two cuda-native MCCL_TORCH_NATIVE=1 BENCH_BACKEND=mccl \
	    BENCH_DEVICE=cuda-per-rank "$PY" "$here/gloo_allreduce.py" 2 1024 \
	    "$max" 200
	two cuda-nccl BENCH_BACKEND=nccl BENCH_DEVICE=cuda-per-rank \
	    "$PY" "$here/gloo_allreduce.py" 2 1024 "$max" 200
elif [ "${gpus:-0}" = 1 ]; then
	# both ranks on the one GPU: MCCL's row; NCCL refuses a shared GPU
	two cuda-native-shared-gpu MCCL_TORCH_NATIVE=1 BENCH_BACKEND=mccl \
	    BENCH_DEVICE=cuda "$PY" "$here/gloo_allreduce.py" 2 1024 "$max" 200
	echo "== (one GPU: no NCCL row, it needs a GPU per rank)"
else
	echo "== (no GPU: no CUDA or NCCL rows)"
fi
