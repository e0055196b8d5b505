/* test_cpu.c: the CPU-feature table: level names, BERT8_MAX_ISA caps and errors, agreement
 * with the compiler's own CPU detection, physical core count. */
#include "testutil.h"

#include <stdlib.h>
#include <unistd.h>

#include "base/cpu.h"

int tcpu_spawn_with_cap(const char *isa, const char *child_arg);

TEST(isa_names_round_trip) {
    for (int i = 0; i < B8_ISA_COUNT; i++) {
        b8_isa got = B8_ISA_COUNT;
        CHECK(b8_isa_parse(b8_isa_name((b8_isa)i), &got));
        CHECK(got == (b8_isa)i);
    }
    b8_isa got = B8_ISA_AVX2;
    CHECK(b8_isa_parse("AVX512_VNNI", &got) && got == B8_ISA_AVX512_VNNI);
    CHECK(!b8_isa_parse("avx512vnni", NULL));
    CHECK(!b8_isa_parse("", NULL));
    CHECK(!b8_isa_parse(NULL, NULL));
    CHECK(strcmp(b8_isa_name(B8_ISA_COUNT), "?") == 0);
}

/* gcc's __builtin_cpu_supports reads CPUID independently; the hardware level must agree. */
TEST(hw_level_agrees_with_compiler_detection) {
    const b8_cpu *c = b8_cpu_get();
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    bool vnni = __builtin_cpu_supports("avx512vnni");
    CHECK(c->avx2 == !!__builtin_cpu_supports("avx2"));
    CHECK(c->avx512f == !!__builtin_cpu_supports("avx512f"));
    CHECK(c->avx512vnni == vnni);
    CHECK((c->hw_level >= B8_ISA_AVX2) == (avx2 && c->os_ymm));
    CHECK((c->hw_level >= B8_ISA_AVX512) == (avx2 && avx512 && c->os_ymm && c->os_zmm));
    CHECK((c->hw_level >= B8_ISA_AVX512_VNNI) == (avx2 && avx512 && vnni && c->os_zmm));
    if (c->hw_level >= B8_ISA_AMX) CHECK(c->amx_int8 && c->os_amx_xcr0 && c->os_amx_granted);
    CHECK(c->level <= c->hw_level);
    CHECK(b8_cpu_level() == c->level);
    CHECK(b8_cpu_allows(B8_ISA_SCALAR));
    CHECK(!b8_cpu_allows(B8_ISA_COUNT));
    printf("  hw level %s, level %s, %d physical cores\n", b8_isa_name(c->hw_level),
           b8_isa_name(c->level), c->physical_cores);
}

TEST(physical_cores_within_online_cpus) {
    int n = b8_cpu_physical_cores();
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    CHECK(n >= 1);
    CHECK(n <= online);
}

/* Child modes: each checks what the cap in its environment must produce and exits 0 on
 * success, 1 on a wrong result. */
static int child_main(const char *mode) {
    const b8_cpu *c = b8_cpu_get();
    const char *cap = getenv("BERT8_MAX_ISA");
    b8_err e;
    b8_err_clear(&e);
    if (strcmp(mode, "--expect-valid-cap") == 0) {
        b8_isa want;
        if (!cap || !b8_isa_parse(cap, &want)) return 1;
        bool ok = c->cap_set && !c->cap_invalid && b8_cpu_check_env(&e) == BERT8_OK &&
                  c->level == (want < c->hw_level ? want : c->hw_level);
        return ok ? 0 : 1;
    }
    if (strcmp(mode, "--expect-invalid-cap") == 0) {
        bool ok = c->cap_invalid && !c->cap_set && c->level == c->hw_level &&
                  b8_cpu_check_env(&e) == BERT8_ERR_INVALID_ARG &&
                  strstr(e.msg, "BERT8_MAX_ISA") && cap && strstr(e.msg, cap);
        if (ok) printf("  reported: %s\n", e.msg);
        return ok ? 0 : 1;
    }
    return 2;
}

TEST(max_isa_caps_level_in_child_process) {
    const b8_cpu *c = b8_cpu_get();
    for (int i = 0; i < B8_ISA_COUNT; i++) {
        int rc = tcpu_spawn_with_cap(b8_isa_name((b8_isa)i), "--expect-valid-cap");
        CHECKF(rc == 0, "cap %s: child exit %d", b8_isa_name((b8_isa)i), rc);
    }
    /* Upper case is accepted too. */
    CHECK(tcpu_spawn_with_cap("AVX2", "--expect-valid-cap") == 0);
    (void)c;
}

TEST(invalid_max_isa_is_reported_not_fatal) {
    CHECK(tcpu_spawn_with_cap("avx9000", "--expect-invalid-cap") == 0);
    CHECK(tcpu_spawn_with_cap("avx2 ", "--expect-invalid-cap") == 0);
}

int main(int argc, char **argv) {
    if (argc > 1) return child_main(argv[1]);
    RUN(isa_names_round_trip);
    RUN(hw_level_agrees_with_compiler_detection);
    RUN(physical_cores_within_online_cpus);
    RUN(max_isa_caps_level_in_child_process);
    RUN(invalid_max_isa_is_reported_not_fatal);
    return tu_finish();
}
