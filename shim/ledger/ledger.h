/*
 * ledger.h — the ledger layer: what was shared, by whom, and what broke.
 * Tensors and their records (tensor.c, registry.c, dlpack.c), the device
 * APIs and their allocations (devices.c, allocs.c, external.c), the
 * happens-before model over streams (sync.c and its parts, timelines.c),
 * copy accounting (copies.c), the counters (stats.c), violations
 * (violation.c) and the exit summary (summary.c).
 * What hook families use of it is in shim.h; here is what only the core
 * shares.  Below it: output, image and base.
 */
#ifndef DS_LEDGER_H
#define DS_LEDGER_H

#include "image/image.h"
#include "output/output.h"

/* ---- DLPack view (dlpack.c) --------------------------------------------- */
#define DS_DETAIL_MAX 256   /* a violation's one-sentence detail */

/* A safe copy of a managed tensor, read without trusting its pointers. */
typedef struct ds_tensor_view {
    bool versioned;
    bool readable;          /* the managed struct itself could be read */
    bool tensor_valid;      /* dl_tensor passed every check below */
    uint32_t major, minor;  /* versioned only */
    uint64_t flags;         /* versioned only */
    void *deleter;
    DLTensor t;             /* shape/strides point into the arrays below */
    bool has_strides;
    uint64_t bytes;         /* logical size; 0 when unknown */
    /* Written only as filled.  Every field above is set, one by one, by
     * ds_dlpack_read_struct: a new field must be set there too. */
    int64_t shape[DS_MAX_NDIM];
    int64_t strides[DS_MAX_NDIM];
} ds_tensor_view;

/* ---- registry (registry.c) ---------------------------------------------- */
enum ds_state { DS_EXPORTED = 1, DS_IMPORTED, DS_RELEASED };

/* One managed tensor, keyed by its address.  Released records are kept (so a
 * second deleter call or a late import is recognised) until evicted. */
typedef struct ds_record {
    uintptr_t key;          /* tensor address; 0 marks an empty slot */
    void *orig_deleter;     /* the producer's deleter; NULL when it had none */
    void *chained_deleter;  /* the deleter before a re-export replaced our
                               trampoline; the new one may chain to it */
    uintptr_t data;         /* data pointer + byte_offset */
    uint64_t bytes;
    uint64_t t_export;      /* ns since load */
    uint64_t t_release;
    uint16_t producer;      /* name ids (names.c) */
    uint16_t consumer;
    uint8_t state;          /* enum ds_state */
    uint8_t versioned : 1;
    uint8_t wrapped : 1;    /* our trampoline sits in the tensor's deleter */
    uint8_t copied : 1;     /* the producer flagged the data as a copy */
    uint8_t inherited : 1;  /* made before fork(): the child keeps it (it may
                               release it) but does not count it as its own */
    uint8_t malformed : 1;  /* reported as malformed: a second layer's view
                               of the same struct is not reported again */
    uint8_t provisional : 1; /* imported at its release by a consumer that
                               has yet to mark its capsule taken (a copy,
                               counted once it does) */
    uint8_t aliased : 1;    /* its allocation maps another's memory (an
                               import of Vulkan's): writes there count */
    uint8_t released_by;    /* enum ds_releaser */
    uint16_t releaser;      /* with DS_BY_CONSUMER and DS_BY_TAKER: the name */
    uint16_t export_site, release_site; /* where in the program (sites.c); 0: unknown */
    int32_t device_type;    /* DLDeviceType of the data */
    uint32_t alloc_generation;
    uintptr_t alloc_base;   /* the tracked allocation the data lies in; 0: none */
    uint64_t fingerprint;   /* the DLTensor as exported (tensor.c): changed at import? */
} ds_record;

/* Who ran a tensor's deleter (a double release names the first). */
enum ds_releaser {
    DS_BY_UNKNOWN,  /* never imported, released by whoever held it */
    DS_BY_CONSUMER, /* the consumer that imported it */
    DS_BY_PRODUCER, /* the producer's own holder (its capsule's destructor) */
    DS_BY_TAKER,    /* a consumer that took it without marking it taken */
};

#define DS_BACKTRACE_CAPTURE 64 /* frames a violation captures before cutting its own */

/* ---- dlpack.c: reading, checking and naming DLPack structures ----------- */
/* Reading the managed tensor at `p` takes two steps, so that a caller may
 * stop after the first: the struct itself (v->readable, the deleter and the
 * DLTensor's fields as they are), then the DLTensor checked and its shape
 * copied, and its strides too when `keep_strides` (else they may only be
 * proven readable: v->has_strides says which).  Each returns true when all
 * is well; otherwise `why` holds one sentence naming the first problem. */
bool ds_dlpack_read_struct(const void *p, bool versioned, ds_tensor_view *v, char *why,
                           size_t why_cap);
bool ds_dlpack_check(ds_tensor_view *v, bool keep_strides, char *why, size_t why_cap);
void ds_dtype_name(char *out, size_t cap, DLDataType d);
void ds_device_name(char *out, size_t cap, DLDevice d);
/* Flag names, e.g. {"read_only","is_copied"}; returns how many. */
int ds_flag_names(uint64_t flags, const char **out, int max);

/* ---- registry.c: tensor records keyed by address ------------------------ */
void ds_reg_init(size_t max_records);
/* The registry's shards.  A tensor's address is hashed once per lookup (the
 * value ds_reg_lock returns, which the calls below take): its top bits pick
 * the shard, the bits below them the slot in the shard's table, and the
 * shard's low bits the share index's shard (ds_shares_shard). */
#define DS_REG_SHARDS 64u
_Static_assert(DS_SHARDS_SPIN64 == DS_REG_SHARDS, "a REGISTRY lock shard per table");
static inline uint64_t ds_reg_hash(uintptr_t key)
{
    return (uint64_t)(key >> 3) * 0x9E3779B97F4A7C15ull; /* Fibonacci; structs are 8-aligned */
}
static inline unsigned ds_reg_shard(uint64_t hash)
{
    return (unsigned)(hash >> 58);
}
/* The shares index's shard (shares.c): the registry shard's low bits, not
 * its top ones.  Fibonacci hashing gives tensors a common stride apart
 * (thread stacks are 8 MiB + a guard page apart, same-size blocks of one
 * arena a block apart) far-apart top bits, so they fall in different
 * registry shards; only the top bits of those shards' indexes stay close
 * (two threads' stack tensors shared a SHARES shard in a third of runs). */
static inline unsigned ds_shares_shard(uint64_t hash)
{
    return ds_reg_shard(hash) % DS_SHARDS_SPIN16;
}
/* Takes the shard of `key`; returns the key's hash, for the calls below. */
static inline uint64_t ds_reg_lock(uintptr_t key)
{
    uint64_t hash = ds_reg_hash(key);
    ds_lock_take_shard(DS_LOCK_REGISTRY, ds_reg_shard(hash));
    return hash;
}
static inline void ds_reg_unlock(uint64_t hash)
{
    ds_lock_give_shard(DS_LOCK_REGISTRY, ds_reg_shard(hash));
}
/* Every shard, in order: for ds_reg_foreach, ds_stats_snapshot. */
static inline void ds_reg_lock_all(void)
{
    ds_lock_take(DS_LOCK_REGISTRY);
}
static inline void ds_reg_unlock_all(void)
{
    ds_lock_give(DS_LOCK_REGISTRY);
}
void ds_reg_after_fork(void);
/* The shard of `hash` (ds_reg_lock's answer for `key`) held.  Pointers
 * stay valid until the next ds_reg_insert in the shard. */
ds_record *ds_reg_find(uint64_t hash, uintptr_t key);
/* The same.  A cleared record with `key` (replacing any record with that
 * key), or NULL when the shard is full of live records. */
ds_record *ds_reg_insert(uint64_t hash, uintptr_t key);
/* Its shard held: `r`, found by ds_reg_find, cleared for a new record with
 * its key (what ds_reg_insert would return, without probing again). */
ds_record *ds_reg_renew(ds_record *r);
/* The shard of `hash` held: a number above every earlier answer of the
 * shard (release order where no clock is read, tensor.c; evictions compare
 * within a shard). */
uint64_t ds_reg_next_stamp(uint64_t hash);
/* Every shard held (ds_reg_lock_all). */
void ds_reg_foreach(void (*fn)(const ds_record *r, void *arg), void *arg);
uint64_t ds_reg_evicted(void);

/* ---- stats.c: the counters behind the summary --------------------------- */
/* Registry shard `s` held (the record's): the pairs are counted per shard,
 * with the records, and summed at the summary. */
void ds_stats_share(unsigned s, uint16_t producer, uint16_t consumer, uint64_t bytes,
                    bool zero_copy);
/* Shard `s` held: a share counted as zero-copy turned out a copy (the
 * consumer copied its bytes on import, ds_release_context.copy_on_import). */
void ds_stats_copied(unsigned s, uint16_t producer, uint16_t consumer, uint64_t bytes);
void ds_stats_violation(int kind);
/* Keeps `kind` and this thread's source line as the latest violation. */
void ds_stats_last_violation(int kind);
void ds_stats_untracked(void);
void ds_stats_after_fork(void);
void ds_stats_roundtrip(uint16_t from_owner, uint16_t to_owner);
/* One producer→consumer pair's shares; the totals are the sums, and the
 * zero-copy shares are those that were not copies. */
typedef struct {
    uint16_t producer, consumer;
    uint64_t shares, copies, bytes, bytes_copied, roundtrips;
} ds_pair;
#define DS_PAIRS_MAX 256
typedef struct {
    ds_pair pairs[DS_PAIRS_MAX];
    int npairs;
    ds_pair overflow; /* the shares whose pair did not fit the table */
} ds_stats_snap;
/* Every registry shard held: the shards' pair tables summed (pairs past
 * DS_PAIRS_MAX in all go to the overflow). */
void ds_stats_snapshot(ds_stats_snap *out);
/* Every registry shard held: every pair's counts summed. */
void ds_stats_totals(ds_pair *total);
void ds_stats_violation_counts(uint64_t counts[DS_VIO_COUNT]);
uint64_t ds_stats_untracked_count(void);
/* True once per process (and once more in each forked child): the caller
 * writes the summary. */
bool ds_stats_claim_summary(void);
/* Something a summary counts happened in this process (since fork, in a
 * child): an export, import, release, allocation, free, copy, violation.
 * Cheap enough for every handoff: a load, and a store the first time. */
extern atomic_bool ds_worked;
static inline void ds_note_work(void)
{
    if (!atomic_load_explicit(&ds_worked, memory_order_relaxed))
        atomic_store_explicit(&ds_worked, true, memory_order_relaxed);
}

/* ---- violation.c: reporting a violation --------------------------------- */
int ds_backtrace_capture(void **frames, int max);
/* A "backtrace" array field: the frames outside the shim, at most
 * DLSHIM_BACKTRACE of them, rendered as "symbol+0xoff (module)". */
void ds_backtrace_field(ds_ev *e, void *const *frames, int n);
/* Counts and logs a violation about the object at `addr` (`subject` is the
 * field name: "tensor" or "data"), then applies DLSHIM_ON_ERROR: returns true
 * when the caller must prevent the harmful action (protect); aborts the
 * process with `abort`. */
bool ds_violation(int kind, const char *subject, uintptr_t addr, const char *detail);
/* The same, with more fields written by fields(e, arg) after `detail`. */
bool ds_violation_with(int kind, const char *subject, uintptr_t addr, const char *detail,
                       void (*fields)(ds_ev *e, void *arg), void *arg);
/* What DLSHIM_ON_ERROR=abort writes before abort() (the summary: start-up
 * hands it down, since the summary reads the parts that report). */
void ds_violation_set_last_words(void (*fn)(void));

/* ---- summary.c: the exit summary ---------------------------------------- */
void ds_summary_write(void);

/* ---- devices.c: the device APIs hook families describe ------------------ */
/* The descriptor of an index (one named "?" for an unknown index). */
const ds_device_api *ds_device_api_at(int index);
/* The API whose stream and event handles this one's are: the first
 * registered that drives the same devices (itself if none). */
int ds_device_api_family(int api);
/* The API whose tensors of this DLPack device type carry its handles, or -1. */
int ds_device_api_for_tensors(int32_t device_type);
/* An allocation's DLPack device name: "cuda:0", "cuda_managed:1", … */
void ds_alloc_device_name(char *out, size_t cap, const ds_alloc_info *a);

/* ---- allocs.c: device allocations and the policy for frees -------------- */
/* The allocation holding address p. */
bool ds_alloc_lookup(uintptr_t p, ds_alloc_info *out);
/* A count bumped whenever what ds_alloc_lookup answers may change (an
 * allocation recorded or forgotten): an answer holds while the count read
 * before it was asked for is still the count. */
uint64_t ds_alloc_changes(void);
/* The allocation a tensor's data lies in: at `address` (data + byte_offset),
 * or, where `api` (ds_device_api_for_tensors of the tensor's device type,
 * -1: none) says the tensor carries one of its handles in `data`, the
 * allocation of that handle. */
bool ds_alloc_lookup_tensor(int api, uintptr_t data, uintptr_t address, ds_alloc_info *out);
/* The allocation handle a tensor's handle of `api` names (the handle
 * itself, or what the API maps it to: a buffer's memory), and in *offset
 * where in it the handle's bytes start. */
uintptr_t ds_alloc_memory_of(int api, uintptr_t handle, uint64_t *offset);
void ds_alloc_share(uintptr_t base, uint32_t generation, int delta);
/* Whether that allocation (that generation of it) is still live. */
bool ds_alloc_live(uintptr_t base, uint32_t generation);
/* Where bytes [data, data + bytes) of that allocation lie in the one it
 * maps (alias_of: its space and offset there, cut at the mapping's end);
 * false where it maps none. */
bool ds_alloc_alias_range(uintptr_t base, uint32_t generation, uintptr_t data, uint64_t bytes,
                          ds_range *out);
/* Among the last allocations freed, the newest that held p: what it was,
 * when and where it was freed (site 0: not known). */
bool ds_alloc_freed_at(uintptr_t p, ds_alloc_info *out, uint64_t *t_free, uint16_t *site);
/* False (zeros) when leaving and the allocations' lock is held elsewhere. */
bool ds_alloc_totals(uint64_t *live, uint64_t *bytes, uint64_t *untracked_frees);
void ds_alloc_report_leaks(void);
void ds_alloc_after_fork(void);
const char *ds_alloc_kind_name(int kind);

/* ---- external.c --------------------------------------------------------- */
void ds_extmem_after_fork(void);

/* ---- sync_handoffs.c ---------------------------------------------------- */
/* A device tensor was imported: the last write to its bytes must be covered
 * by the consumer's first use.  `alias` (or NULL): the same bytes as
 * another allocation's, whose writes count too (ds_alloc_alias_range).
 * data 0: a tensor that carries a handle, whose bytes are `alias` alone
 * (offsets in its memory), where its consumer's uses are found too. */
void ds_sync_import(uintptr_t tensor, uintptr_t data, uint64_t bytes, const ds_range *alias,
                    uint16_t producer, uint16_t consumer);
/* A CPU tensor over host-visible device memory (a Vulkan mapping, pinned or
 * managed memory) was imported: the consumer reads it on the host now, so
 * the last write to its bytes must be covered by the host's clock. */
void ds_sync_host_reads(uintptr_t tensor, uintptr_t data, uint64_t bytes, uint16_t producer,
                        uint16_t consumer);
uint64_t ds_sync_barriers(void);

/* ---- shares.c: the live shares by the bytes they cover ------------------- */
/* Whether a tensor's data pointer is a host address, which a host free can
 * take away; another device's is a handle or a device address (a Vulkan
 * tensor's data is its VkDeviceMemory, which may be the driver's own heap
 * block: freeing it is vkFreeMemory's business, reported there). */
static inline bool ds_in_host_memory(int32_t device_type)
{
    return device_type == kDLCPU || device_type == kDLCUDAHost ||
           device_type == kDLCUDAManaged || device_type == kDLROCMHost;
}

/* Indexes the shares from now on (built from the registry the first time). */
void ds_shares_index(void);
/* Every export and release (a load while nothing asked for the index). */
/* `hash`: the tensor's, ds_reg_hash(tensor). */
/* `host`: the bytes are in host memory (ds_in_host_memory). */
void ds_shares_added(uint64_t hash, uintptr_t tensor, uintptr_t data, uint64_t bytes, bool host);
void ds_shares_removed(uint64_t hash, uintptr_t tensor);
/* The tensor of a live share overlapping [a, a + bytes) (when several do,
 * one); 0: none (or the index is not kept). */
uintptr_t ds_shares_at(uintptr_t a, uint64_t bytes);
/* The same for host memory's frees: a share in host memory, or one of
 * another that a wider look meanwhile came upon (the caller checks). */
uintptr_t ds_shares_host_at(uintptr_t a, uint64_t bytes);
/* Bumped as a share is added or removed. */
uint64_t ds_shares_changes(void);

/* ---- host_frees.c ----------------------------------------------------------- */
/* Host frees watched for a dying capsule's tensor (its struct and data),
 * nested as destructors nest; unwatch: whether a free covered either. */
void ds_host_frees_watch(ds_drop_watch *w);
bool ds_host_frees_unwatch(ds_drop_watch *w);
/* Whether the host free family watches frees (it armed at the first export). */
bool ds_host_frees_armed(void);
/* A share ended: a free deferred under protect may now be made. */
void ds_host_frees_share_ended(void);

/* ---- unloads.c ---------------------------------------------------------------- */
/* A share ended (its deleter has run): a dlclose deferred may be made now. */
void ds_unloads_share_ended(void);

/* ---- copies.c: copy accounting ------------------------------------------ */
/* True when the newest copy into these bytes came from another tracked
 * buffer, was no host-to-device copy, covers them, and was made inside the
 * export call (this thread, this line of the interpreted program);
 * *source: where the bytes came from. */
bool ds_copies_filled_by_copy(uintptr_t data, uint64_t bytes, uintptr_t *source);
void ds_copies_totals(uint64_t *count, uint64_t *bytes, uint64_t *roundtrips);
void ds_copies_after_fork(void);
void ds_sync_after_fork(void);

#endif /* DS_LEDGER_H */
