#!/bin/sh
# gen_rmm_levels.sh - write rmm_levels.h, the per-level lists of the replay
# kernel (kernels/rmm.h), for levels 1..30. The C preprocessor cannot loop,
# so these lists are spelled out; edit this script, not its output:
#   sh backends/fpga/kernels/gen_rmm_levels.sh > backends/fpga/kernels/rmm_levels.h
set -eu
max=30
cat <<'HEAD'
/* rmm_levels.h - the tree levels of one RMM build as X-macro lists.
 * Written by gen_rmm_levels.sh: edit the script, not this file.
 *
 * RMM_FOR_LEVELS(X) expands X(1) X(2) ... X(RMM_H): one expansion per tree
 * level below the root, so rmm.h can declare one on-chip array (with its
 * own word type) per level and rmm.c one access case per level. It covers
 * the model's deepest tree (K = 2, N = 2^30: 30 levels).
 *
 * RMM_PKIND_h names how level h's array is partitioned, for the kernel
 * top's pragmas (rmm.c RMM_PARTITION): REGS (a replicated level in
 * registers, RMM_PORT_REGS), SUBBANKS (a replicated level of write-banked
 * sub-banks, RMM_PORT_BANKED) or BANKS (one memory per pipeline: a private
 * level, or a replica with one port). A pragma's text cannot be chosen by
 * an expression, only by #if, hence one #if per level.
 */
#ifndef RMM_LEVELS_H
#define RMM_LEVELS_H

HEAD
echo "#if RMM_H > $max"
echo "#error \"RMM_H above $max: extend gen_rmm_levels.sh\""
echo "#endif"
echo
h=1
while [ $h -le $max ]; do
  b=$((h - 1))
  cat <<LEVEL
#if RMM_H >= $h
#define RMM_L$h(X) X($h)
#else
#define RMM_L$h(X)
#endif
#if $h <= RMM_J && ((RMM_PORT_REGS >> $b) & 1)
#define RMM_PKIND_$h REGS
#elif $h <= RMM_J && ((RMM_PORT_BANKED >> $b) & 1)
#define RMM_PKIND_$h SUBBANKS
#else
#define RMM_PKIND_$h BANKS
#endif
LEVEL
  h=$((h + 1))
done
echo
echo "#define RMM_FOR_LEVELS(X) \\"
h=1
while [ $h -lt $max ]; do
  echo "  RMM_L$h(X) \\"
  h=$((h + 1))
done
echo "  RMM_L$max(X)"
echo
echo "#endif"
