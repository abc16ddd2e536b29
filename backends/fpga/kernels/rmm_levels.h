/* rmm_levels.h - the tree levels of one RMM build as an X-macro list.
 *
 * RMM_FOR_LEVELS(X) expands X(1) X(2) ... X(RMM_H): one expansion per tree
 * level below the root, so rmm.h can declare one on-chip array (with its
 * own word type) per level and rmm.c one access case per level. The C
 * preprocessor cannot loop, hence this mechanical list; it covers the
 * model's deepest tree (K = 2, N = 2^30: 30 levels). Generated once by a
 * shell loop; edit the loop, not the lines.
 */
#ifndef RMM_LEVELS_H
#define RMM_LEVELS_H

#if RMM_H > 30
#error "RMM_H above 30: extend rmm_levels.h"
#endif

#if RMM_H >= 1
#define RMM_L1(X) X(1)
#else
#define RMM_L1(X)
#endif
#if RMM_H >= 2
#define RMM_L2(X) X(2)
#else
#define RMM_L2(X)
#endif
#if RMM_H >= 3
#define RMM_L3(X) X(3)
#else
#define RMM_L3(X)
#endif
#if RMM_H >= 4
#define RMM_L4(X) X(4)
#else
#define RMM_L4(X)
#endif
#if RMM_H >= 5
#define RMM_L5(X) X(5)
#else
#define RMM_L5(X)
#endif
#if RMM_H >= 6
#define RMM_L6(X) X(6)
#else
#define RMM_L6(X)
#endif
#if RMM_H >= 7
#define RMM_L7(X) X(7)
#else
#define RMM_L7(X)
#endif
#if RMM_H >= 8
#define RMM_L8(X) X(8)
#else
#define RMM_L8(X)
#endif
#if RMM_H >= 9
#define RMM_L9(X) X(9)
#else
#define RMM_L9(X)
#endif
#if RMM_H >= 10
#define RMM_L10(X) X(10)
#else
#define RMM_L10(X)
#endif
#if RMM_H >= 11
#define RMM_L11(X) X(11)
#else
#define RMM_L11(X)
#endif
#if RMM_H >= 12
#define RMM_L12(X) X(12)
#else
#define RMM_L12(X)
#endif
#if RMM_H >= 13
#define RMM_L13(X) X(13)
#else
#define RMM_L13(X)
#endif
#if RMM_H >= 14
#define RMM_L14(X) X(14)
#else
#define RMM_L14(X)
#endif
#if RMM_H >= 15
#define RMM_L15(X) X(15)
#else
#define RMM_L15(X)
#endif
#if RMM_H >= 16
#define RMM_L16(X) X(16)
#else
#define RMM_L16(X)
#endif
#if RMM_H >= 17
#define RMM_L17(X) X(17)
#else
#define RMM_L17(X)
#endif
#if RMM_H >= 18
#define RMM_L18(X) X(18)
#else
#define RMM_L18(X)
#endif
#if RMM_H >= 19
#define RMM_L19(X) X(19)
#else
#define RMM_L19(X)
#endif
#if RMM_H >= 20
#define RMM_L20(X) X(20)
#else
#define RMM_L20(X)
#endif
#if RMM_H >= 21
#define RMM_L21(X) X(21)
#else
#define RMM_L21(X)
#endif
#if RMM_H >= 22
#define RMM_L22(X) X(22)
#else
#define RMM_L22(X)
#endif
#if RMM_H >= 23
#define RMM_L23(X) X(23)
#else
#define RMM_L23(X)
#endif
#if RMM_H >= 24
#define RMM_L24(X) X(24)
#else
#define RMM_L24(X)
#endif
#if RMM_H >= 25
#define RMM_L25(X) X(25)
#else
#define RMM_L25(X)
#endif
#if RMM_H >= 26
#define RMM_L26(X) X(26)
#else
#define RMM_L26(X)
#endif
#if RMM_H >= 27
#define RMM_L27(X) X(27)
#else
#define RMM_L27(X)
#endif
#if RMM_H >= 28
#define RMM_L28(X) X(28)
#else
#define RMM_L28(X)
#endif
#if RMM_H >= 29
#define RMM_L29(X) X(29)
#else
#define RMM_L29(X)
#endif
#if RMM_H >= 30
#define RMM_L30(X) X(30)
#else
#define RMM_L30(X)
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
