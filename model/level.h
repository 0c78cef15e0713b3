// model/level.h: the instruction-set level of this build's kernels, as ./run's closing line
// and make bench name it: the widest the compiler was allowed (-march), which the kernels are
// chosen by, and AMX where Linux lends the process its tiles.
#ifndef ATTN_MODEL_LEVEL_H
#define ATTN_MODEL_LEVEL_H

#include "quant_panels.h"

#if defined(__AVX512F__)
#if defined(__AVX512VNNI__)
#define LEVEL_VNNI "+VNNI"
#else
#define LEVEL_VNNI ""
#endif
#if defined(__AVX512VBMI__)
#define LEVEL_VBMI "+VBMI"
#else
#define LEVEL_VBMI ""
#endif
#if defined(__AVX512BF16__)
#define LEVEL_BF16 "+BF16"
#else
#define LEVEL_BF16 ""
#endif
#define LEVEL_AVX512 "AVX-512" LEVEL_VNNI LEVEL_VBMI LEVEL_BF16
#endif
static inline const char *kernel_level(void) {
#if defined(__AVX512F__)
#if defined(QUANT_AMX)
    if (amx_usable()) return LEVEL_AVX512 "+AMX";
#endif
    return LEVEL_AVX512;
#elif defined(__AVX2__) && defined(__AVXVNNI__)
    return "AVX2+FMA+AVX-VNNI";
#elif defined(__AVX2__) && defined(__FMA__)
    return "AVX2+FMA";
#else
    return "portable C";
#endif
}

#endif
