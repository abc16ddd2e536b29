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

#if RMM_H > 30
#error "RMM_H above 30: extend gen_rmm_levels.sh"
#endif

#if RMM_H >= 1
#define RMM_L1(X) X(1)
#else
#define RMM_L1(X)
#endif
#if 1 <= RMM_J && ((RMM_PORT_REGS >> 0) & 1)
#define RMM_PKIND_1 REGS
#elif 1 <= RMM_J && ((RMM_PORT_BANKED >> 0) & 1)
#define RMM_PKIND_1 SUBBANKS
#else
#define RMM_PKIND_1 BANKS
#endif
#if RMM_H >= 2
#define RMM_L2(X) X(2)
#else
#define RMM_L2(X)
#endif
#if 2 <= RMM_J && ((RMM_PORT_REGS >> 1) & 1)
#define RMM_PKIND_2 REGS
#elif 2 <= RMM_J && ((RMM_PORT_BANKED >> 1) & 1)
#define RMM_PKIND_2 SUBBANKS
#else
#define RMM_PKIND_2 BANKS
#endif
#if RMM_H >= 3
#define RMM_L3(X) X(3)
#else
#define RMM_L3(X)
#endif
#if 3 <= RMM_J && ((RMM_PORT_REGS >> 2) & 1)
#define RMM_PKIND_3 REGS
#elif 3 <= RMM_J && ((RMM_PORT_BANKED >> 2) & 1)
#define RMM_PKIND_3 SUBBANKS
#else
#define RMM_PKIND_3 BANKS
#endif
#if RMM_H >= 4
#define RMM_L4(X) X(4)
#else
#define RMM_L4(X)
#endif
#if 4 <= RMM_J && ((RMM_PORT_REGS >> 3) & 1)
#define RMM_PKIND_4 REGS
#elif 4 <= RMM_J && ((RMM_PORT_BANKED >> 3) & 1)
#define RMM_PKIND_4 SUBBANKS
#else
#define RMM_PKIND_4 BANKS
#endif
#if RMM_H >= 5
#define RMM_L5(X) X(5)
#else
#define RMM_L5(X)
#endif
#if 5 <= RMM_J && ((RMM_PORT_REGS >> 4) & 1)
#define RMM_PKIND_5 REGS
#elif 5 <= RMM_J && ((RMM_PORT_BANKED >> 4) & 1)
#define RMM_PKIND_5 SUBBANKS
#else
#define RMM_PKIND_5 BANKS
#endif
#if RMM_H >= 6
#define RMM_L6(X) X(6)
#else
#define RMM_L6(X)
#endif
#if 6 <= RMM_J && ((RMM_PORT_REGS >> 5) & 1)
#define RMM_PKIND_6 REGS
#elif 6 <= RMM_J && ((RMM_PORT_BANKED >> 5) & 1)
#define RMM_PKIND_6 SUBBANKS
#else
#define RMM_PKIND_6 BANKS
#endif
#if RMM_H >= 7
#define RMM_L7(X) X(7)
#else
#define RMM_L7(X)
#endif
#if 7 <= RMM_J && ((RMM_PORT_REGS >> 6) & 1)
#define RMM_PKIND_7 REGS
#elif 7 <= RMM_J && ((RMM_PORT_BANKED >> 6) & 1)
#define RMM_PKIND_7 SUBBANKS
#else
#define RMM_PKIND_7 BANKS
#endif
#if RMM_H >= 8
#define RMM_L8(X) X(8)
#else
#define RMM_L8(X)
#endif
#if 8 <= RMM_J && ((RMM_PORT_REGS >> 7) & 1)
#define RMM_PKIND_8 REGS
#elif 8 <= RMM_J && ((RMM_PORT_BANKED >> 7) & 1)
#define RMM_PKIND_8 SUBBANKS
#else
#define RMM_PKIND_8 BANKS
#endif
#if RMM_H >= 9
#define RMM_L9(X) X(9)
#else
#define RMM_L9(X)
#endif
#if 9 <= RMM_J && ((RMM_PORT_REGS >> 8) & 1)
#define RMM_PKIND_9 REGS
#elif 9 <= RMM_J && ((RMM_PORT_BANKED >> 8) & 1)
#define RMM_PKIND_9 SUBBANKS
#else
#define RMM_PKIND_9 BANKS
#endif
#if RMM_H >= 10
#define RMM_L10(X) X(10)
#else
#define RMM_L10(X)
#endif
#if 10 <= RMM_J && ((RMM_PORT_REGS >> 9) & 1)
#define RMM_PKIND_10 REGS
#elif 10 <= RMM_J && ((RMM_PORT_BANKED >> 9) & 1)
#define RMM_PKIND_10 SUBBANKS
#else
#define RMM_PKIND_10 BANKS
#endif
#if RMM_H >= 11
#define RMM_L11(X) X(11)
#else
#define RMM_L11(X)
#endif
#if 11 <= RMM_J && ((RMM_PORT_REGS >> 10) & 1)
#define RMM_PKIND_11 REGS
#elif 11 <= RMM_J && ((RMM_PORT_BANKED >> 10) & 1)
#define RMM_PKIND_11 SUBBANKS
#else
#define RMM_PKIND_11 BANKS
#endif
#if RMM_H >= 12
#define RMM_L12(X) X(12)
#else
#define RMM_L12(X)
#endif
#if 12 <= RMM_J && ((RMM_PORT_REGS >> 11) & 1)
#define RMM_PKIND_12 REGS
#elif 12 <= RMM_J && ((RMM_PORT_BANKED >> 11) & 1)
#define RMM_PKIND_12 SUBBANKS
#else
#define RMM_PKIND_12 BANKS
#endif
#if RMM_H >= 13
#define RMM_L13(X) X(13)
#else
#define RMM_L13(X)
#endif
#if 13 <= RMM_J && ((RMM_PORT_REGS >> 12) & 1)
#define RMM_PKIND_13 REGS
#elif 13 <= RMM_J && ((RMM_PORT_BANKED >> 12) & 1)
#define RMM_PKIND_13 SUBBANKS
#else
#define RMM_PKIND_13 BANKS
#endif
#if RMM_H >= 14
#define RMM_L14(X) X(14)
#else
#define RMM_L14(X)
#endif
#if 14 <= RMM_J && ((RMM_PORT_REGS >> 13) & 1)
#define RMM_PKIND_14 REGS
#elif 14 <= RMM_J && ((RMM_PORT_BANKED >> 13) & 1)
#define RMM_PKIND_14 SUBBANKS
#else
#define RMM_PKIND_14 BANKS
#endif
#if RMM_H >= 15
#define RMM_L15(X) X(15)
#else
#define RMM_L15(X)
#endif
#if 15 <= RMM_J && ((RMM_PORT_REGS >> 14) & 1)
#define RMM_PKIND_15 REGS
#elif 15 <= RMM_J && ((RMM_PORT_BANKED >> 14) & 1)
#define RMM_PKIND_15 SUBBANKS
#else
#define RMM_PKIND_15 BANKS
#endif
#if RMM_H >= 16
#define RMM_L16(X) X(16)
#else
#define RMM_L16(X)
#endif
#if 16 <= RMM_J && ((RMM_PORT_REGS >> 15) & 1)
#define RMM_PKIND_16 REGS
#elif 16 <= RMM_J && ((RMM_PORT_BANKED >> 15) & 1)
#define RMM_PKIND_16 SUBBANKS
#else
#define RMM_PKIND_16 BANKS
#endif
#if RMM_H >= 17
#define RMM_L17(X) X(17)
#else
#define RMM_L17(X)
#endif
#if 17 <= RMM_J && ((RMM_PORT_REGS >> 16) & 1)
#define RMM_PKIND_17 REGS
#elif 17 <= RMM_J && ((RMM_PORT_BANKED >> 16) & 1)
#define RMM_PKIND_17 SUBBANKS
#else
#define RMM_PKIND_17 BANKS
#endif
#if RMM_H >= 18
#define RMM_L18(X) X(18)
#else
#define RMM_L18(X)
#endif
#if 18 <= RMM_J && ((RMM_PORT_REGS >> 17) & 1)
#define RMM_PKIND_18 REGS
#elif 18 <= RMM_J && ((RMM_PORT_BANKED >> 17) & 1)
#define RMM_PKIND_18 SUBBANKS
#else
#define RMM_PKIND_18 BANKS
#endif
#if RMM_H >= 19
#define RMM_L19(X) X(19)
#else
#define RMM_L19(X)
#endif
#if 19 <= RMM_J && ((RMM_PORT_REGS >> 18) & 1)
#define RMM_PKIND_19 REGS
#elif 19 <= RMM_J && ((RMM_PORT_BANKED >> 18) & 1)
#define RMM_PKIND_19 SUBBANKS
#else
#define RMM_PKIND_19 BANKS
#endif
#if RMM_H >= 20
#define RMM_L20(X) X(20)
#else
#define RMM_L20(X)
#endif
#if 20 <= RMM_J && ((RMM_PORT_REGS >> 19) & 1)
#define RMM_PKIND_20 REGS
#elif 20 <= RMM_J && ((RMM_PORT_BANKED >> 19) & 1)
#define RMM_PKIND_20 SUBBANKS
#else
#define RMM_PKIND_20 BANKS
#endif
#if RMM_H >= 21
#define RMM_L21(X) X(21)
#else
#define RMM_L21(X)
#endif
#if 21 <= RMM_J && ((RMM_PORT_REGS >> 20) & 1)
#define RMM_PKIND_21 REGS
#elif 21 <= RMM_J && ((RMM_PORT_BANKED >> 20) & 1)
#define RMM_PKIND_21 SUBBANKS
#else
#define RMM_PKIND_21 BANKS
#endif
#if RMM_H >= 22
#define RMM_L22(X) X(22)
#else
#define RMM_L22(X)
#endif
#if 22 <= RMM_J && ((RMM_PORT_REGS >> 21) & 1)
#define RMM_PKIND_22 REGS
#elif 22 <= RMM_J && ((RMM_PORT_BANKED >> 21) & 1)
#define RMM_PKIND_22 SUBBANKS
#else
#define RMM_PKIND_22 BANKS
#endif
#if RMM_H >= 23
#define RMM_L23(X) X(23)
#else
#define RMM_L23(X)
#endif
#if 23 <= RMM_J && ((RMM_PORT_REGS >> 22) & 1)
#define RMM_PKIND_23 REGS
#elif 23 <= RMM_J && ((RMM_PORT_BANKED >> 22) & 1)
#define RMM_PKIND_23 SUBBANKS
#else
#define RMM_PKIND_23 BANKS
#endif
#if RMM_H >= 24
#define RMM_L24(X) X(24)
#else
#define RMM_L24(X)
#endif
#if 24 <= RMM_J && ((RMM_PORT_REGS >> 23) & 1)
#define RMM_PKIND_24 REGS
#elif 24 <= RMM_J && ((RMM_PORT_BANKED >> 23) & 1)
#define RMM_PKIND_24 SUBBANKS
#else
#define RMM_PKIND_24 BANKS
#endif
#if RMM_H >= 25
#define RMM_L25(X) X(25)
#else
#define RMM_L25(X)
#endif
#if 25 <= RMM_J && ((RMM_PORT_REGS >> 24) & 1)
#define RMM_PKIND_25 REGS
#elif 25 <= RMM_J && ((RMM_PORT_BANKED >> 24) & 1)
#define RMM_PKIND_25 SUBBANKS
#else
#define RMM_PKIND_25 BANKS
#endif
#if RMM_H >= 26
#define RMM_L26(X) X(26)
#else
#define RMM_L26(X)
#endif
#if 26 <= RMM_J && ((RMM_PORT_REGS >> 25) & 1)
#define RMM_PKIND_26 REGS
#elif 26 <= RMM_J && ((RMM_PORT_BANKED >> 25) & 1)
#define RMM_PKIND_26 SUBBANKS
#else
#define RMM_PKIND_26 BANKS
#endif
#if RMM_H >= 27
#define RMM_L27(X) X(27)
#else
#define RMM_L27(X)
#endif
#if 27 <= RMM_J && ((RMM_PORT_REGS >> 26) & 1)
#define RMM_PKIND_27 REGS
#elif 27 <= RMM_J && ((RMM_PORT_BANKED >> 26) & 1)
#define RMM_PKIND_27 SUBBANKS
#else
#define RMM_PKIND_27 BANKS
#endif
#if RMM_H >= 28
#define RMM_L28(X) X(28)
#else
#define RMM_L28(X)
#endif
#if 28 <= RMM_J && ((RMM_PORT_REGS >> 27) & 1)
#define RMM_PKIND_28 REGS
#elif 28 <= RMM_J && ((RMM_PORT_BANKED >> 27) & 1)
#define RMM_PKIND_28 SUBBANKS
#else
#define RMM_PKIND_28 BANKS
#endif
#if RMM_H >= 29
#define RMM_L29(X) X(29)
#else
#define RMM_L29(X)
#endif
#if 29 <= RMM_J && ((RMM_PORT_REGS >> 28) & 1)
#define RMM_PKIND_29 REGS
#elif 29 <= RMM_J && ((RMM_PORT_BANKED >> 28) & 1)
#define RMM_PKIND_29 SUBBANKS
#else
#define RMM_PKIND_29 BANKS
#endif
#if RMM_H >= 30
#define RMM_L30(X) X(30)
#else
#define RMM_L30(X)
#endif
#if 30 <= RMM_J && ((RMM_PORT_REGS >> 29) & 1)
#define RMM_PKIND_30 REGS
#elif 30 <= RMM_J && ((RMM_PORT_BANKED >> 29) & 1)
#define RMM_PKIND_30 SUBBANKS
#else
#define RMM_PKIND_30 BANKS
#endif

#define RMM_FOR_LEVELS(X) \
  RMM_L1(X) \
  RMM_L2(X) \
  RMM_L3(X) \
  RMM_L4(X) \
  RMM_L5(X) \
  RMM_L6(X) \
  RMM_L7(X) \
  RMM_L8(X) \
  RMM_L9(X) \
  RMM_L10(X) \
  RMM_L11(X) \
  RMM_L12(X) \
  RMM_L13(X) \
  RMM_L14(X) \
  RMM_L15(X) \
  RMM_L16(X) \
  RMM_L17(X) \
  RMM_L18(X) \
  RMM_L19(X) \
  RMM_L20(X) \
  RMM_L21(X) \
  RMM_L22(X) \
  RMM_L23(X) \
  RMM_L24(X) \
  RMM_L25(X) \
  RMM_L26(X) \
  RMM_L27(X) \
  RMM_L28(X) \
  RMM_L29(X) \
  RMM_L30(X)

#endif
