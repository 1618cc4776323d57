// SPDX-License-Identifier: GPL-2.0
/*
 * qprof.c - minimal QEMU TCG plugin: guest instruction counts per
 * translation block, for profiling a guest kernel under TCG.
 *
 * Usage:
 *   -plugin file=/path/qprof.so,out=<prefix>[,mark=<hex vaddr>][,inline=on|off]
 *
 * Records are keyed by (vaddr of first insn, n_insns).  Each execution of a
 * TB adds 1 to its record.  A dump has one line per record with a non-zero
 * count, "<vaddr hex> <n_insns> <count>", after a header line
 * "# total_insns <sum of n_insns*count>".
 *
 * If mark=<vaddr> is given, each execution of a TB starting exactly at that
 * vaddr writes <prefix>.<N> (N = 0, 1, ...) and resets all counts to zero.
 * The marker TB's own execution is counted in the window it closes (i.e. in
 * <prefix>.<N>), never in the new one.  At exit <prefix>.final is written.
 *
 * No QEMU headers and no glib: the few API declarations needed are written
 * out below; they match the plugin API of QEMU 9.0 .. 10.0 (API version 4 at
 * QEMU 9.2/10.0; the minimum accepted by 10.0 is 2).
 */
#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>

/* ---- minimal QEMU plugin API declarations (own, not copied) ---------- */

#define QP_EXPORT __attribute__((visibility("default")))

typedef uint64_t qemu_plugin_id_t;

typedef struct qemu_info_t qemu_info_t;     /* only ever received by pointer */
struct qemu_plugin_tb;
struct qemu_plugin_scoreboard;

/* a uint64_t slot at byte offset 'offset' inside each vCPU's scoreboard entry */
typedef struct {
    struct qemu_plugin_scoreboard *score;
    size_t offset;
} qemu_plugin_u64;

enum qemu_plugin_cb_flags {
    QEMU_PLUGIN_CB_NO_REGS = 0,
    QEMU_PLUGIN_CB_R_REGS = 1,
    QEMU_PLUGIN_CB_RW_REGS = 2,
};

enum qemu_plugin_op {
    QEMU_PLUGIN_INLINE_ADD_U64 = 0,
    QEMU_PLUGIN_INLINE_STORE_U64 = 1,
};

typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index,
                                            void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id,
                                               struct qemu_plugin_tb *tb);

extern void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
                                                  qemu_plugin_vcpu_tb_trans_cb_t cb);
extern void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb,
                                                 qemu_plugin_vcpu_udata_cb_t cb,
                                                 enum qemu_plugin_cb_flags flags,
                                                 void *userdata);
extern void qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(
    struct qemu_plugin_tb *tb, enum qemu_plugin_op op,
    qemu_plugin_u64 entry, uint64_t imm);
extern void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id,
                                           qemu_plugin_udata_cb_t cb,
                                           void *userdata);
extern size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
extern uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
extern struct qemu_plugin_scoreboard *qemu_plugin_scoreboard_new(size_t sz);
extern uint64_t qemu_plugin_u64_get(qemu_plugin_u64 entry, unsigned int vcpu);
extern void qemu_plugin_u64_add(qemu_plugin_u64 entry, unsigned int vcpu,
                                uint64_t v);
extern void qemu_plugin_u64_set(qemu_plugin_u64 entry, unsigned int vcpu,
                                uint64_t v);
extern int qemu_plugin_num_vcpus(void);

/*
 * API level this plugin is written against.  QEMU 10.0.x reports
 * min=2, cur=4 and refuses plugins outside [min, cur]; everything used here
 * exists unchanged since level 2 (QEMU 9.0), so 4 is accepted by 9.2..10.x
 * (10.1 raised cur to 5 without raising min).
 */
QP_EXPORT int qemu_plugin_version = 4;

/* ---- records ---------------------------------------------------------- */

typedef struct Record {
    uint64_t vaddr;
    uint32_t n_insns;
    uint32_t is_marker;
    uint64_t count;                      /* used when inline=off */
    struct qemu_plugin_scoreboard *sb;   /* per-vCPU u64, used when inline=on */
} Record;

/* records live in fixed-size slabs that are never moved or freed */
#define SLAB_RECORDS 4096
typedef struct Slab {
    struct Slab *next;
    size_t used;
    Record r[SLAB_RECORDS];
} Slab;

static Slab *slab_head;

/* open-addressing hash table of Record pointers (only pointers move) */
static Record **tab;
static size_t tab_cap;      /* power of two */
static size_t n_records;

static pthread_mutex_t tab_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t dump_lock = PTHREAD_MUTEX_INITIALIZER;

static char *out_prefix;
static bool have_mark;
static uint64_t mark_vaddr;
static bool use_inline = true;
static unsigned dump_seq;

static inline size_t hash_key(uint64_t vaddr, uint32_t n)
{
    uint64_t h = vaddr ^ ((uint64_t)n << 48) ^ ((uint64_t)n * 0x9e37ULL);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return (size_t)h;
}

static void tab_grow(void)
{
    size_t ncap = tab_cap ? tab_cap * 2 : 1 << 16;
    Record **nt = calloc(ncap, sizeof(*nt));
    if (!nt) {
        fprintf(stderr, "qprof: out of memory\n");
        abort();
    }
    for (size_t i = 0; i < tab_cap; i++) {
        Record *r = tab[i];
        if (!r) {
            continue;
        }
        size_t j = hash_key(r->vaddr, r->n_insns) & (ncap - 1);
        while (nt[j]) {
            j = (j + 1) & (ncap - 1);
        }
        nt[j] = r;
    }
    free(tab);
    tab = nt;
    tab_cap = ncap;
}

static Record *record_alloc(void)
{
    if (!slab_head || slab_head->used == SLAB_RECORDS) {
        Slab *s = calloc(1, sizeof(*s));
        if (!s) {
            fprintf(stderr, "qprof: out of memory\n");
            abort();
        }
        s->next = slab_head;
        slab_head = s;
    }
    return &slab_head->r[slab_head->used++];
}

/* caller holds tab_lock */
static Record *record_get(uint64_t vaddr, uint32_t n)
{
    if ((n_records + 1) * 2 > tab_cap) {
        tab_grow();
    }
    size_t j = hash_key(vaddr, n) & (tab_cap - 1);
    for (;;) {
        Record *r = tab[j];
        if (!r) {
            break;
        }
        if (r->vaddr == vaddr && r->n_insns == n) {
            return r;
        }
        j = (j + 1) & (tab_cap - 1);
    }
    Record *r = record_alloc();
    r->vaddr = vaddr;
    r->n_insns = n;
    r->is_marker = have_mark && vaddr == mark_vaddr;
    if (use_inline) {
        r->sb = qemu_plugin_scoreboard_new(sizeof(uint64_t));
    }
    tab[j] = r;
    n_records++;
    return r;
}

static inline qemu_plugin_u64 rec_u64(Record *r)
{
    qemu_plugin_u64 e = { r->sb, 0 };
    return e;
}

/* read a record's count and reset it to zero */
static uint64_t record_take(Record *r)
{
    if (!use_inline) {
        return __atomic_exchange_n(&r->count, 0, __ATOMIC_RELAXED);
    }
    qemu_plugin_u64 e = rec_u64(r);
    uint64_t sum = 0;
    int nv = qemu_plugin_num_vcpus();
    /*
     * Other vCPUs keep running: an increment landing between the read and
     * the reset of its slot is lost (the inline add is not atomic anyway).
     */
    for (int v = 0; v < nv; v++) {
        sum += qemu_plugin_u64_get(e, (unsigned)v);
        qemu_plugin_u64_set(e, (unsigned)v, 0);
    }
    return sum;
}

/* ---- dumping ---------------------------------------------------------- */

typedef struct {
    uint64_t vaddr;
    uint32_t n;
    uint64_t count;
} Snap;

static int snap_cmp(const void *a, const void *b)
{
    const Snap *x = a, *y = b;
    if (x->vaddr != y->vaddr) {
        return x->vaddr < y->vaddr ? -1 : 1;
    }
    return (x->n > y->n) - (x->n < y->n);
}

/* write all non-zero records to 'path' and reset them; caller holds dump_lock */
static void dump_to(const char *path)
{
    pthread_mutex_lock(&tab_lock);
    Snap *s = malloc((n_records ? n_records : 1) * sizeof(*s));
    size_t ns = 0;
    uint64_t total = 0;
    if (s) {
        for (size_t i = 0; i < tab_cap; i++) {
            Record *r = tab[i];
            if (!r) {
                continue;
            }
            uint64_t c = record_take(r);
            if (c) {
                s[ns].vaddr = r->vaddr;
                s[ns].n = r->n_insns;
                s[ns].count = c;
                total += c * r->n_insns;
                ns++;
            }
        }
    }
    pthread_mutex_unlock(&tab_lock);
    if (!s) {
        fprintf(stderr, "qprof: out of memory while dumping %s\n", path);
        return;
    }
    qsort(s, ns, sizeof(*s), snap_cmp);

    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    if (!tmp) {
        free(s);
        return;
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "qprof: cannot open %s: %s\n", tmp, strerror(errno));
        free(tmp);
        free(s);
        return;
    }
    static char iobuf[1 << 16];
    setvbuf(f, iobuf, _IOFBF, sizeof(iobuf));
    fprintf(f, "# total_insns %" PRIu64 "\n", total);
    for (size_t i = 0; i < ns; i++) {
        fprintf(f, "%" PRIx64 " %u %" PRIu64 "\n", s[i].vaddr, s[i].n,
                s[i].count);
    }
    if (fclose(f) != 0) {
        fprintf(stderr, "qprof: error writing %s: %s\n", tmp, strerror(errno));
    } else if (rename(tmp, path) != 0) {
        fprintf(stderr, "qprof: cannot rename %s: %s\n", tmp, strerror(errno));
    }
    free(tmp);
    free(s);
}

static void dump_numbered(void)
{
    size_t plen = strlen(out_prefix);
    char *path = malloc(plen + 24);
    if (!path) {
        return;
    }
    snprintf(path, plen + 24, "%s.%u", out_prefix, dump_seq++);
    dump_to(path);
    free(path);
}

/* ---- callbacks -------------------------------------------------------- */

static void tb_exec_count(unsigned int vcpu, void *udata)
{
    Record *r = udata;
    (void)vcpu;
    __atomic_fetch_add(&r->count, 1, __ATOMIC_RELAXED);
}

static void tb_exec_marker(unsigned int vcpu, void *udata)
{
    Record *r = udata;
    /* count the marker in the window it closes */
    if (use_inline) {
        qemu_plugin_u64_add(rec_u64(r), vcpu, 1);
    } else {
        __atomic_fetch_add(&r->count, 1, __ATOMIC_RELAXED);
    }
    pthread_mutex_lock(&dump_lock);
    dump_numbered();
    pthread_mutex_unlock(&dump_lock);
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    uint64_t vaddr = qemu_plugin_tb_vaddr(tb);
    uint32_t n = (uint32_t)qemu_plugin_tb_n_insns(tb);

    pthread_mutex_lock(&tab_lock);
    Record *r = record_get(vaddr, n);
    pthread_mutex_unlock(&tab_lock);

    if (r->is_marker) {
        qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_exec_marker,
                                             QEMU_PLUGIN_CB_NO_REGS, r);
    } else if (use_inline) {
        qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(
            tb, QEMU_PLUGIN_INLINE_ADD_U64, rec_u64(r), 1);
    } else {
        qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_exec_count,
                                             QEMU_PLUGIN_CB_NO_REGS, r);
    }
}

static void at_exit(qemu_plugin_id_t id, void *udata)
{
    (void)id;
    (void)udata;
    size_t plen = strlen(out_prefix);
    char *path = malloc(plen + 8);
    if (!path) {
        return;
    }
    snprintf(path, plen + 8, "%s.final", out_prefix);
    pthread_mutex_lock(&dump_lock);
    dump_to(path);
    pthread_mutex_unlock(&dump_lock);
    free(path);
}

/* ---- install ---------------------------------------------------------- */

static bool parse_hex(const char *s, uint64_t *out)
{
    char *end;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        s += 2;
    }
    if (!*s) {
        return false;
    }
    errno = 0;
    unsigned long long v = strtoull(s, &end, 16);
    if (errno || *end) {
        return false;
    }
    *out = v;
    return true;
}

QP_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                  int argc, char **argv)
{
    (void)info;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strncmp(a, "out=", 4) && a[4]) {
            out_prefix = strdup(a + 4);
        } else if (!strncmp(a, "mark=", 5)) {
            if (!parse_hex(a + 5, &mark_vaddr)) {
                fprintf(stderr, "qprof: bad mark address '%s'\n", a + 5);
                return -1;
            }
            have_mark = true;
        } else if (!strcmp(a, "inline=on") || !strcmp(a, "inline=true")) {
            use_inline = true;
        } else if (!strcmp(a, "inline=off") || !strcmp(a, "inline=false")) {
            use_inline = false;
        } else {
            fprintf(stderr, "qprof: unknown argument '%s' "
                    "(want out=PREFIX[,mark=HEXADDR][,inline=on|off])\n", a);
            return -1;
        }
    }
    if (!out_prefix) {
        fprintf(stderr, "qprof: missing required argument out=PREFIX\n");
        return -1;
    }
    pthread_mutex_lock(&tab_lock);
    tab_grow();
    pthread_mutex_unlock(&tab_lock);

    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
