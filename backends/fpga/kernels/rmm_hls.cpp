// rmm_hls.cpp - the synthesis entry of the replay module: Vitis HLS offers
// arbitrary-precision integers (ap_uint<W>, the per-level widths of
// papers/001 §IV-C4) only to C++ (UG1399, "C Arbitrary Precision Types"),
// so v++ compiles the C kernel through this file as C++; rmm.h picks
// ap_uint<W> when __SYNTHESIS__ and __cplusplus are both defined. Not part
// of the meson build (see build_xclbin.sh); never synthesised here.
#include "rmm.c"
