/* A processor with AVX-512 and VNNI seen as one with AVX2 only, at native speed: loaded
 * before a process starts (LD_PRELOAD), it makes the CPUID instruction fault (Linux's
 * arch_prctl(ARCH_SET_CPUID), on a processor with CPUID faulting: `cpuid_fault` in
 * /proc/cpuinfo) and answers it itself, with the AVX-512, VNNI (AVX-512's and AVX's) and
 * AMX bits cleared. ONNX Runtime and NumPy then choose the kernels they choose on an
 * AVX2-only processor, as under `qemu-x86_64 -cpu Haswell` but about 500 times faster
 * (docs/encoding.md, "Without VNNI"). A program that installs its own SIGSEGV handler
 * after it starts (pytest's faulthandler: run it with `-p no:faulthandler`) takes the
 * fault from it.
 *
 *     gcc -O2 -shared -fPIC -o /tmp/avx2_only.so tests/avx2_only.c
 *     LD_PRELOAD=/tmp/avx2_only.so .venv/bin/python ...
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define ARCH_SET_CPUID 0x1012
#define BIT(n) (1u << (n))

static void cpuid_runs(int on) { syscall(SYS_arch_prctl, ARCH_SET_CPUID, on); }

static void answer(int sig, siginfo_t *info, void *context) {
    ucontext_t *uc = context;
    greg_t *r = uc->uc_mcontext.gregs;
    const uint8_t *at = (const uint8_t *)r[REG_RIP];
    (void)info;
    if (at[0] != 0x0f || at[1] != 0xa2) {   /* a real fault: the default action */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    uint32_t leaf = (uint32_t)r[REG_RAX], sub = (uint32_t)r[REG_RCX], a, b, c, d;
    cpuid_runs(1);
    __cpuid_count(leaf, sub, a, b, c, d);
    cpuid_runs(0);
    if (leaf == 7 && sub == 0) {
        /* AVX-512 F, DQ, IFMA, PF, ER, CD, BW, VL */
        b &= ~(BIT(16) | BIT(17) | BIT(21) | BIT(26) | BIT(27) | BIT(28) | BIT(30) | BIT(31));
        /* AVX-512 VBMI, VBMI2, VNNI, BITALG, VPOPCNTDQ */
        c &= ~(BIT(1) | BIT(6) | BIT(11) | BIT(12) | BIT(14));
        /* AVX-512 4VNNIW, 4FMAPS, VP2INTERSECT, FP16; AMX BF16, TILE, INT8 */
        d &= ~(BIT(2) | BIT(3) | BIT(8) | BIT(22) | BIT(23) | BIT(24) | BIT(25));
    } else if (leaf == 7 && sub == 1) {
        a &= ~(BIT(4) | BIT(5) | BIT(23));   /* AVX-VNNI, AVX-512 BF16, AVX-IFMA */
    }
    r[REG_RAX] = a, r[REG_RBX] = b, r[REG_RCX] = c, r[REG_RDX] = d;
    r[REG_RIP] += 2;   /* past the two bytes of CPUID */
}

__attribute__((constructor)) static void seen_as_avx2_only(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = answer;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGSEGV, &action, 0);
    cpuid_runs(0);   /* inherited by the threads and children this process starts */
}
