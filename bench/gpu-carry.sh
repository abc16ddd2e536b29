#!/usr/bin/env bash
# bench/gpu-carry.sh - build replayd and check_gpu_daemon here, for a GPU
# machine that has CUDA but not the daemon's libraries (gRPC, SQLite, libuv):
# the two programs and the non-system shared libraries they load go into
# gpucarry/ (ignored by git), which the device tool carries. On the GPU
# machine, from the repository root:
#
#   LD_LIBRARY_PATH=$PWD/gpucarry/lib:/usr/local/cuda/lib64 \
#     gpucarry/bin/check_gpu_daemon gpucarry/bin/replayd
#
# (cuBLAS and the driver come from the GPU machine; glibc and libstdc++
# too: a newer one there runs what was linked against Debian 12's.)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bdir=build-gpucarry
[ -f "$bdir/build.ninja" ] || meson setup "$bdir" --buildtype=release -Dxrt=disabled -Dcuda=enabled
ninja -C "$bdir" daemon/replayd tests/gpu/check_gpu_daemon
rm -rf gpucarry
mkdir -p gpucarry/bin gpucarry/lib
grep -qx '/gpucarry/' .git/info/exclude 2>/dev/null || echo '/gpucarry/' >> .git/info/exclude
cp "$bdir/daemon/replayd" "$bdir/tests/gpu/check_gpu_daemon" gpucarry/bin/
for f in $(ldd gpucarry/bin/replayd gpucarry/bin/check_gpu_daemon | awk '/=>/ {print $3}' | sort -u); do
  case "$(basename "$f")" in
    libc.so*|libm.so*|libpthread*|libdl.so*|librt.so*|ld-linux*|libstdc++*|libgcc_s*|libcublas*) ;;
    *) cp -L "$f" gpucarry/lib/ ;;
  esac
done
du -sh gpucarry
