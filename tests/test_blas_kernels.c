/* OpenBLAS's kernel choice checked against the CPU's instructions (src/kernels/cpu/blas_kernels.h),
 * on recorded (CPU flags, core OpenBLAS reported) pairs, so that the logic is checked on any
 * machine; then on this machine: the core that runs is at least what its flags allow, unless
 * OPENBLAS_CORETYPE chose it. */
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "kernels/cpu/blas_kernels.h"
#include "pelab/threads.h"

/* /proc/cpuinfo's flags of a 2-core Intel Xeon (family 6, model 85) virtual machine, as read:
 * AVX-512 without BF16. OpenBLAS 0.3.21 knows the model and reported SkylakeX. */
static const char xeon_85[] =
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse "
    "sse2 ss ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid "
    "tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt "
    "tsc_deadline_timer aes xsave avx f16c rdrand hypervisor lahf_lm abm 3dnowprefetch cpuid_fault "
    "ssbd ibrs ibpb stibp ibrs_enhanced fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid mpx "
    "avx512f avx512dq rdseed adx smap clflushopt clwb avx512cd avx512bw avx512vl xsaveopt xsavec "
    "xgetbv1 xsaves arat umip pku ospke avx512_vnni md_clear flush_l1d arch_capabilities";

/* An Intel Xeon of family 6, model 207 (AVX-512 with BF16 and FP16, AMX not exposed): the
 * instruction-set flags it reported. OpenBLAS 0.3.21 does not know the model and reported
 * Prescott (its SSE3 kernels: sgemm 31.9 GFLOP/s on one thread, 76.4 as SkylakeX, 81.8 as
 * Cooperlake). */
static const char xeon_207[] =
    "fpu sse sse2 ssse3 sse4_1 sse4_2 fma avx f16c avx2 bmi1 bmi2 avx512f avx512dq avx512ifma "
    "avx512cd avx512bw avx512vl avx512_bf16 avx512vbmi avx512_vbmi2 avx512_vnni avx512_bitalg "
    "avx512_vpopcntdq avx512_fp16 amx_bf16_absent_here";

static void check_pair(const char *what, const char *flags, const char *reported, const char *want) {
    const char *got = pelab_blas_better_core(pelab_isa_from_flags(flags), reported);
    if (!want)
        CHECK(got == NULL, "%s: reported %s, expected no change, got %s", what, reported, got);
    else
        CHECK(got && strcmp(got, want) == 0, "%s: reported %s, expected %s, got %s", what, reported,
              want, got ? got : "no change");
}

int main(void) {
    /* the instruction-set level of a flags line */
    CHECK(pelab_isa_from_flags(xeon_85) == PELAB_ISA_AVX512, "model 85: AVX-512");
    CHECK(pelab_isa_from_flags(xeon_207) == PELAB_ISA_AVX512_BF16, "model 207: AVX-512 with BF16");
    CHECK(pelab_isa_from_flags("sse sse2 pni ssse3") == PELAB_ISA_SSE3, "no AVX");
    CHECK(pelab_isa_from_flags("sse2 avx f16c") == PELAB_ISA_AVX, "AVX without AVX2");
    CHECK(pelab_isa_from_flags("avx avx2") == PELAB_ISA_AVX, "AVX2 without FMA");
    CHECK(pelab_isa_from_flags("avx avx2 fma") == PELAB_ISA_AVX2, "AVX2 with FMA");
    /* all five AVX-512 subsets are needed; a name is a whole word, not a prefix */
    CHECK(pelab_isa_from_flags("avx avx2 fma avx512f avx512cd avx512bw avx512dq") == PELAB_ISA_AVX2,
          "AVX-512 without VL");
    CHECK(pelab_isa_from_flags("avx avx2 fma avx512f avx512cd avx512bw avx512dq avx512vlx") ==
              PELAB_ISA_AVX2, "avx512vlx is not avx512vl");
    CHECK(pelab_isa_from_flags("avx avx2 fma avx512f avx512cd avx512bw avx512dq avx512vl avx512_bf16x") ==
              PELAB_ISA_AVX512, "avx512_bf16x is not avx512_bf16");
    CHECK(pelab_isa_from_flags("avx2 fma") == PELAB_ISA_SSE3, "AVX2 listed without AVX");

    /* recorded pairs */
    check_pair("Xeon model 207, OpenBLAS 0.3.21", xeon_207, "Prescott", "Cooperlake");
    check_pair("Xeon model 85, OpenBLAS 0.3.21", xeon_85, "SkylakeX", NULL);
    /* the rule on the other levels */
    check_pair("AVX-512 reported Prescott", xeon_85, "Prescott", "SkylakeX");
    check_pair("AVX-512 reported Haswell", xeon_85, "Haswell", "SkylakeX");
    check_pair("AVX-512 with BF16 reported SkylakeX", xeon_207, "SkylakeX", "Cooperlake");
    check_pair("AVX-512 with BF16 reported Zen (AVX2 kernels)", xeon_207, "Zen", "Cooperlake");
    check_pair("AVX-512 with BF16 reported Cooperlake", xeon_207, "Cooperlake", NULL);
    check_pair("AVX2 reported Nehalem", "avx avx2 fma", "Nehalem", "Haswell");
    check_pair("AVX2 reported Zen", "avx avx2 fma", "Zen", NULL);
    check_pair("AVX reported Prescott", "avx", "Prescott", "Sandybridge");
    check_pair("SSE3 reported Prescott", "sse3 pni", "Prescott", NULL);
    /* a core this table does not know (a newer OpenBLAS's) is left alone; names match in any case */
    check_pair("unknown core", xeon_207, "GraniteRapids", NULL);
    check_pair("no core", xeon_207, NULL, NULL);
    check_pair("lower-case name", xeon_207, "prescott", "Cooperlake");
    /* every better core is one this table knows, at the level it is chosen for */
    for (int isa = PELAB_ISA_AVX; isa <= PELAB_ISA_AVX512_BF16; isa++) {
        const char *core = pelab_blas_better_core((enum pelab_isa)isa, "Prescott");
        CHECK(core && pelab_blas_core_isa(core) == isa, "level %s: core %s", pelab_isa_name(isa),
              core ? core : "none");
    }

    /* this machine: the kernels are named, and are the best the CPU allows unless the user chose */
    const char *kernels = pelab_blas_kernels();
    CHECK(strstr(kernels, "kernels") != NULL, "pelab_blas_kernels: %s", kernels);
    CHECK(strstr(kernels, "this CPU allows") == NULL || getenv("OPENBLAS_CORETYPE") != NULL,
          "OpenBLAS runs below what this CPU allows: %s", kernels);
    printf("this machine: %s\n", kernels);
    return check_report("test_blas_kernels");
}
