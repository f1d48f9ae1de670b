// SPDX-License-Identifier: GPL-2.0
/*
 * How often each translation block of the guest's kernel ran: a QEMU TCG
 * plugin (plugin API version 1, as QEMU 7.2 in Debian 12 has it, declared
 * here: Debian ships no plugin header). The bench's PROFILER=insns loads
 * it into both guests; it follows the guest's results log (the second
 * -serial file of its command line) and at each line "RR-INSNS-SNAP TAG"
 * writes the cumulative counts, "vaddr instructions count" per block, to
 * DIR/insns-VM-TAG.txt (dir=DIR among its arguments). Exact under icount:
 * a block's instructions all run once it is entered, but for a fault or
 * an interrupt inside it, which the kernel's hot paths do not take.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pthread.h>
#include <sys/stat.h>

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
__attribute__((visibility("default"))) int qemu_plugin_version = 1;
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
        void (*cb)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb));
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb,
        enum qemu_plugin_op op, void *ptr, uint64_t imm);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id,
        void (*cb)(qemu_plugin_id_t id, void *p), void *userdata);

/* One block, by its address and length: retranslated, it counts on. */
struct blk {
    uint64_t vaddr;
    uint64_t n;
    uint64_t count;
    struct blk *next;
};
#define NB (1u << 20)
static struct blk *tab[NB];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* The kernel's half of the address space: user code is not counted. */
static const uint64_t lo = 0xffff800000000000ull;

static void trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    uint64_t va = qemu_plugin_tb_vaddr(tb), n = qemu_plugin_tb_n_insns(tb);
    if (va < lo)
        return;
    unsigned h = (unsigned)((va >> 2) ^ (va >> 22) ^ (n << 7)) & (NB - 1);
    pthread_mutex_lock(&lock);
    struct blk *b;
    for (b = tab[h]; b; b = b->next)
        if (b->vaddr == va && b->n == n)
            break;
    if (!b) {
        b = calloc(1, sizeof(*b));
        if (!b) {
            pthread_mutex_unlock(&lock);
            return;
        }
        b->vaddr = va;
        b->n = n;
        b->next = tab[h];
        tab[h] = b;
    }
    pthread_mutex_unlock(&lock);
    /* Not atomic: the guests have one vCPU. */
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &b->count, 1);
}


/* Cumulative counts of every block run so far, to PATH. */
static void dump_to(const char *path)
{
    char tmp[1300];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    pthread_mutex_lock(&lock);
    for (unsigned i = 0; i < NB; i++)
        for (struct blk *b = tab[i]; b; b = b->next)
            if (b->count)
                fprintf(f, "%llx %llu %llu\n", (unsigned long long)b->vaddr,
                        (unsigned long long)b->n,
                        (unsigned long long)__atomic_load_n(&b->count, __ATOMIC_RELAXED));
    pthread_mutex_unlock(&lock);
    fclose(f);
    rename(tmp, path);
}

static char logpath[512], outdir[512], vmname[128];

/* Follows the guest's results log: a line "RR-INSNS-SNAP TAG" takes a
 * snapshot to OUTDIR/insns-VM-TAG.txt. */
static void *watch(void *arg)
{
    FILE *f = NULL;
    char line[1024];
    size_t have = 0;
    for (;;) {
        if (!f && !(f = fopen(logpath, "r"))) {
            usleep(100000);
            continue;
        }
        if (!fgets(line + have, sizeof(line) - have, f)) {
            clearerr(f);
            /* QEMU truncates the log it opens after us. */
            long at = ftell(f);
            fseek(f, 0, SEEK_END);
            if (ftell(f) < at)
                fseek(f, 0, SEEK_SET), have = 0;
            else
                fseek(f, at, SEEK_SET);
            usleep(50000);
            continue;
        }
        have = strlen(line);
        if (have && line[have - 1] != '\n' && have < sizeof(line) - 1)
            continue;
        line[strcspn(line, "\r\n")] = 0;
        have = 0;
        char *p = strstr(line, "RR-INSNS-SNAP ");
        if (!p)
            continue;
        char path[1200];
        snprintf(path, sizeof(path), "%s/insns-%s-%s.txt", outdir, vmname, p + 14);
        for (char *c = path + strlen(outdir) + 1; *c; c++)
            if (*c == ' ' || *c == '/')
                *c = '_';
        dump_to(path);
    }
    return NULL;
}

/* The VM's results log: the second "-serial file:..." of our command line. */
static int find_log(void)
{
    static char cmd[65536];
    FILE *f = fopen("/proc/self/cmdline", "r");
    if (!f)
        return -1;
    size_t n = fread(cmd, 1, sizeof(cmd) - 1, f);
    fclose(f);
    cmd[n] = 0;
    int serials = 0;
    for (size_t i = 0; i < n; i += strlen(cmd + i) + 1) {
        if (strcmp(cmd + i, "-serial") || i + 7 >= n)
            continue;
        const char *a = cmd + i + 8;
        if (strncmp(a, "file:", 5) || ++serials != 2)
            continue;
        snprintf(logpath, sizeof(logpath), "%s", a + 5);
        const char *base = strrchr(logpath, '/');
        base = base ? base + 1 : logpath;
        snprintf(vmname, sizeof(vmname), "%.*s", (int)strcspn(base, "."), base);
        return 0;
    }
    return -1;
}

__attribute__((visibility("default")))
int qemu_plugin_install(qemu_plugin_id_t id, const void *info, int argc, char **argv)
{
    snprintf(outdir, sizeof(outdir), "/tmp");
    for (int i = 0; i < argc; i++)
        if (!strncmp(argv[i], "dir=", 4))
            snprintf(outdir, sizeof(outdir), "%s", argv[i] + 4);
    if (find_log())
        return -1;
    pthread_t t;
    if (pthread_create(&t, NULL, watch, NULL))
        return -1;
    pthread_detach(t);
    qemu_plugin_register_vcpu_tb_trans_cb(id, trans);
    return 0;
}
