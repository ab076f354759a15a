/*
 * shim.h — the core as hook families see it, and all of it they may use.
 *
 * A hook file includes this header and the headers of hooks/, nothing else of the core:
 * the layers' own headers (image.h, output/output.h, ledger.h, start.h)
 * declare what only the core's files share.  Below the API lies the floor
 * every layer uses too (base/base.h: locks, safe memory, names, options,
 * diagnostics) and the event builder (output/ev.h).  The core's files that
 * define what is declared here include it as well, as mimalloc's sources
 * include mimalloc.h: the compiler holds each definition to its
 * declaration.
 *
 * By layer, bottom up: image (GOT hooks, symbol resolution, ELF, entry
 * specs), output (the source locator, the running test), ledger (tensors,
 * device APIs, allocations, streams, copies, status), start (is the shim
 * tracking, the families' options, the end of the process).
 */
#ifndef DS_SHIM_H
#define DS_SHIM_H

#include "base/base.h"
#include "dlshim.h"
#include "output/ev.h"

/* ==== image: modules, their GOT, and the real functions ================== */
/* What elf.c needs of one loaded module; every pointer lies in [lo, hi). */
typedef struct ds_elf_module {
    uintptr_t base;             /* load bias */
    uintptr_t lo, hi;           /* the loaded image (PT_LOAD union) */
    uintptr_t relro_lo, relro_hi; /* pages made read-only after relocation */
    const void *symtab;         /* Elf64_Sym[nsyms] */
    size_t nsyms;
    const char *strtab;
    size_t strsz;
    const void *jmprel, *rela;  /* Elf64_Rela[] */
    size_t njmprel, nrela;
    size_t runpath_off, rpath_off; /* string table offsets */
    bool has_runpath, has_rpath;
} ds_elf_module;

/* One function a hook family takes over in every module's GOT. */
typedef struct ds_got_hook {
    const char *name;  /* exact symbol name */
    void *wrapper;     /* ours */
    void **real;       /* where the real function's address is kept */
    void *only;        /* non-NULL: redirect only slots bound to this definition */
} ds_got_hook;

#define DS_ENTRY_ARGS_MAX 16
enum ds_entry_type {
    DS_ET_VOID, DS_ET_I8, DS_ET_I16, DS_ET_I32, DS_ET_I64, DS_ET_U8, DS_ET_U16, DS_ET_U32,
    DS_ET_U64, DS_ET_BOOL, DS_ET_F32, DS_ET_F64, DS_ET_PTR, DS_ET_STR, DS_ET_T, DS_ET_V
};
enum ds_entry_role { DS_ER_NONE, DS_ER_EXPORT, DS_ER_IMPORT };

typedef struct ds_entry_spec {
    char module[256]; /* empty: any module */
    char symbol[256];
    int nargs;
    uint8_t arg_type[DS_ENTRY_ARGS_MAX], arg_role[DS_ENTRY_ARGS_MAX];
    uint8_t ret_type, ret_role;
} ds_entry_spec;

/* ---- entry_spec.c ---- */
/* A list: ';'-separated, or one per line with '#' comments (by_lines).
 * Calls fn for each good spec; a bad one is one diagnostic naming `origin`,
 * the spec or line number, the column and why. */
void ds_entry_parse_list(const char *text, size_t len, bool by_lines, const char *origin,
                         void (*fn)(const ds_entry_spec *spec, void *arg), void *arg);

/* ---- elf.c (the opener's search path of a bare dlopen) ---- */
/* NULL on success, else why the module cannot be patched. */
const char *ds_elf_open(ds_elf_module *m, uintptr_t base, const void *phdrs, int phnum);
/* A NUL-terminated string of the string table, or NULL if out of bounds. */
const char *ds_elf_string(const ds_elf_module *m, size_t offset);

/* ---- modules.c: loaded modules, their names, and GOT patching ----------- */
/* Hook families register before the first ds_modules_refresh. */
void ds_got_hooks_add(const ds_got_hook *hooks, size_t n);
/* The same, but modules whose file name starts with one of `file_prefixes`
 * (a NULL-terminated list, kept by the caller) keep their own slots: another
 * family already sees the handoffs their calls make, or their calls are
 * the C library's own, made where a wrapper must not run. */
void ds_got_hooks_add_except(const ds_got_hook *hooks, size_t n,
                             const char *const *file_prefixes);
/* The same again, with a word raised by one, for good, the first time one
 * of these hooks' modules stop holding one definition (*real is then not
 * every caller's): a wrapper that tests that word alone on its fast path
 * (the host frees) learns there to ask ds_got_original instead. */
void ds_got_hooks_add_gated(const ds_got_hook *hooks, size_t n,
                            const char *const *file_prefixes, atomic_uint *diverged_gate);
/* Names a module from its path (hooks/frameworks.c provides it). */
void ds_modules_set_namer(void (*namer)(const char *path, char *out, size_t cap));
/* The definition a wrapper forwards to when called from `caller`: the one
 * the caller's own GOT slot held, else the global one (*global_real, found
 * by name on first use).  Asked on every hooked call: the usual answer
 * (every module holds the one global definition) is inline. */
extern atomic_bool ds_any_diverged;
void *ds_got_original_slow(const void *wrapper, void **global_real, const char *name,
                           const void *caller);
/* The one global definition, where no module diverged and it is known; else
 * NULL (ds_got_original_slow knows). */
static inline void *ds_got_global(void **global_real)
{
    if (atomic_load_explicit(&ds_any_diverged, memory_order_relaxed))
        return NULL;
    return __atomic_load_n(global_real, __ATOMIC_ACQUIRE);
}
static inline void *ds_got_original(const void *wrapper, void **global_real, const char *name,
                                    const void *caller)
{
    void *global = ds_got_global(global_real);
    return global ? global : ds_got_original_slow(wrapper, global_real, name, caller);
}
/* In a wrapper: its real function for this call, e.g.
 * DS_REAL(wrap_New, real_New, "PyCapsule_New")(args...). */
#define DS_REAL(wrapper, real, name)                                                       \
    ((__typeof__(real))ds_got_original((void *)(wrapper), (void **)&(real), (name),       \
                                       __builtin_return_address(0)))
/* For a function pointer a lookup API hands out (dlsym, cuGetProcAddress):
 * the wrapper of the hook `name`, with `real` kept as the definition for
 * `caller`'s module (and as the global one if none is known yet); `real`
 * itself when `name` is not hooked. */
void *ds_hook_for_lookup(const char *name, void *real, const void *caller);
/* Whether `name` is a hook's. */
bool ds_hook_named(const char *name);
/* Patches modules loaded since the last call; forgets unloaded ones. */
void ds_modules_refresh(void);
/* The caller a module's name id stands for, for ds_module_caller_at: the
 * Python package behind a module that only passes calls on (ctypes'
 * libffi), the module itself for any other. */
void ds_modules_set_caller_namer(uint16_t (*fn)(uint16_t module));
/* The module holding `addr` (a return address): the interned name id of
 * the caller it stands for (the module's, or the one behind it, above), or
 * the module's own (memoized: the cheap one on hot paths).  An id, not a
 * copy of the name: an allocation's owner is kept as one, and ds_name
 * gives the text. */
uint16_t ds_module_caller_at(const void *addr);
uint16_t ds_module_id_at(const void *addr);
/* The loaded range of the module holding addr; false if none does. */
bool ds_module_range(const void *addr, uintptr_t *lo, uintptr_t *hi);

/* ---- resolve.c: finding the real function behind a hook ----------------- */
/* The next definition of `name` after the shim, else the first that is not
 * `ours` (the executable's, where libpython is linked in). */
void *ds_resolve_real(const char *name, const void *ours);
/* `name` as defined by the library that defines `fn` (its local scope), so a
 * helper call (cudaGetDevice beside cudaMalloc) reaches the same runtime. */
void *ds_resolve_beside(const void *fn, const char *name);
/* Whether the function at `fn` is its library's definition of `name`. */
bool ds_defines(const void *fn, const char *name);
/* glibc's own dlsym (hooks/dlsym.c interposes the symbol). */
void *ds_real_dlsym(void *handle, const char *name);
/* glibc's dlopen, past the shim's own hook (a library the shim itself uses). */
void *ds_real_dlopen(const char *file, int mode);

/* ==== output: what every event says of where it happened ================== */
#define DS_WHERE_MAX DS_SITE_MAX /* a source location, "file.py:LINE in function", NUL included */

/* A source location as the interpreter's hook family gives it: its text in
 * the caller's scratch buffer, never NUL-terminated for sure. */
typedef struct {
    const char *text;
    size_t len;   /* < DS_WHERE_MAX */
    bool plain;   /* printable ASCII without '"' or '\\': nothing to escape */
    bool spaced;  /* holds a space: quoted in text too */
    uint16_t site; /* the text interned (ds_site_intern); 0: none */
} ds_where;

/* What a hook family that knows an interpreter tells the core: where the
 * calling thread is in the interpreted program.  Both return nothing (false,
 * 0) when the thread runs no interpreted code or may not ask now. */
typedef struct ds_locator {
    /* The innermost location outside the frameworks' own packages (the
     * innermost of all when every one is theirs); `scratch` holds its text
     * where the family keeps none. */
    bool (*here)(ds_where *out, char scratch[DS_WHERE_MAX]);
    /* Up to max locations, innermost first; how many. */
    int (*stack)(char (*out)[DS_WHERE_MAX], int max);
} ds_locator;

void ds_context_set_locator(const ds_locator *l);
void ds_context_set_test(const char *name); /* NULL or "": no test runs */

/* ==== ledger: tensors, device APIs, allocations, streams, copies ========== */
/* ---- device APIs (devices.c) and their allocations (allocs.c) ------------ */
/* MAPPED: another allocation's bytes mapped into host memory (vkMapMemory). */
enum ds_alloc_kind {
    DS_ALLOC_DEVICE, DS_ALLOC_HOST, DS_ALLOC_MANAGED, DS_ALLOC_ASYNC, DS_ALLOC_MAPPED,
    DS_ALLOC_KINDS
};
#define DS_DEVICE_APIS_MAX 8
/* What a device runtime's hook family tells the core about it. */
typedef struct ds_device_api {
    const char *name;                        /* alloc events' `api` */
    const char *device_type[DS_ALLOC_KINDS]; /* DLPack device names, by allocation kind */
    /* Stream handles with a meaning of their own besides 0, which is the
     * legacy default stream (0: the API has none). */
    uintptr_t legacy_stream, per_thread_stream;
    /* Makes `consumer` wait for all work queued so far on `producer` (an
     * event recorded on one, waited for by the other); false when it cannot. */
    bool (*barrier)(uintptr_t producer, uintptr_t consumer);
    /* Performs a free the shim deferred (DLSHIM_ON_ERROR=protect). */
    void (*release)(uintptr_t base, int kind);
    /* Its allocations are named by opaque handles, not addresses (Vulkan's
     * VkDeviceMemory): kept apart from addresses, each one key wide. */
    bool handles;
    /* The DLPack device type whose tensors carry such a handle in `data`
     * (0: none), and how to get from what a tensor carries (a buffer) to
     * its allocation's handle and where in it the buffer starts (NULL, or
     * false: the handle itself, from its start). */
    int32_t tensor_device_type;
    bool (*memory_of)(uintptr_t handle, uintptr_t *memory, uint64_t *offset);
    /* Names of the bits of ds_alloc_info.properties (NULL: none). */
    const char *const *property_names;
    /* What its streams are called in reports (NULL: "stream"; Vulkan's are
     * queues). */
    const char *stream_noun;
    /* Makes the host wait, for a bounded time, for the work queued so far
     * on `stream`, and tells the model so (DLSHIM_SYNC=enforce, a consumer
     * reading on the host); false when it cannot or the time ran out.
     * NULL: the API has no such wait. */
    bool (*host_wait)(uintptr_t stream);
} ds_device_api;
/* What a hooked free must do (ds_alloc_free_check). */
enum { DS_FREE_FORWARD, DS_FREE_DEFER, DS_FREE_REFUSE };

/* Copy directions (copies.c); INFER: from what the two sides are. */
enum ds_copy_dir { DS_COPY_H2D, DS_COPY_D2H, DS_COPY_D2D, DS_COPY_H2H, DS_COPY_PEER, DS_COPY_INFER };

/* A byte range a device operation reads or writes (sync.c).  `space` 0:
 * addresses.  Otherwise the generation of an allocation of a handle API
 * (ds_alloc_info.generation: one number per allocation the process made),
 * and `start` an offset in it: how a Vulkan queue's write to exported
 * memory is kept, found again through any API's mapping of that memory
 * (ds_alloc_alias_range), made before or after it. */
typedef struct ds_range {
    uintptr_t start;
    uint64_t len;
    bool write;
    uint32_t space;
} ds_range;

/* A file descriptor and the file it refers to (external.c). */
typedef struct ds_file_id {
    uint64_t dev, ino;
    int fd;
} ds_file_id;

typedef struct ds_alloc_info {
    uintptr_t base;
    uint64_t size;
    void *stream;  /* async allocations */
    uint16_t owner; /* name id (set by ds_alloc_record) */
    int device;
    int kind;      /* enum ds_alloc_kind */
    int api;       /* the device API's index (ds_device_api_add) */
    uint32_t generation;
    uint8_t properties; /* the API's own bits (its descriptor names them) */
    /* Another allocation whose memory this one is (0: none).  Tensors
     * shared in this one count as shared in that one too.  `alias_holds`:
     * this one keeps that one in use (external memory a second API imported
     * and mapped): freeing that one while this lives is freed_while_shared.
     * Otherwise a view that freeing that one legally ends (a host mapping).
     * `alias_offset`: where in that one this one's first byte is (the
     * mapping's offset: CUDA's and HIP's buffer descriptors', vkMapMemory's). */
    uintptr_t alias_of;
    uint32_t alias_generation;
    bool alias_holds;
    uint64_t alias_offset;
} ds_alloc_info;

/* Registers a device runtime's descriptor (kept, not copied); its index,
 * which the calls below take as `api`, or -1 when the table is full. */
int ds_device_api_add(const ds_device_api *api);
/* After a successful allocation; `owner`: the calling module's name id.
 * Its generation (0: not tracked, the index out of memory). */
uint32_t ds_alloc_record(const ds_alloc_info *a, uint16_t owner);
/* The allocation of `api` holding p (an address, or one of its handles). */
bool ds_alloc_lookup_in(int api, uintptr_t p, ds_alloc_info *out);
/* Before forwarding a free of p: DS_FREE_FORWARD, or (protect) DS_FREE_DEFER
 * (report success, freed at the last release) / DS_FREE_REFUSE (report the
 * runtime's invalid-value error).  Reports the violations. */
int ds_alloc_free_check(uintptr_t p, int api, int kind, const char *caller);
/* After a successful free of `api`'s allocation at base. */
void ds_alloc_forget(uintptr_t base, int api, const char *caller);

/* ---- external.c: memory and semaphores exported by one API, imported by
 * another ------------------------------------------------------------------ */
/* What a descriptor refers to, read before an importer takes it over. */
bool ds_extmem_identify(int fd, ds_file_id *out);
/* `api` exported its allocation `memory` (a handle or base) as `fd`. */
void ds_extmem_exported(int api, uintptr_t memory, int fd);
/* `api` imported the descriptor `id` as its object `handle`. */
void ds_extmem_imported(int api, uintptr_t handle, const ds_file_id *id);
/* The exported allocation an import object stands for; false: unknown. */
bool ds_extmem_source(int api, uintptr_t handle, uintptr_t *base, uint32_t *generation);
void ds_extmem_destroyed(int api, uintptr_t handle);
/* `api` exported its semaphore (binary, or timeline: ds_timeline_is) as `fd`. */
void ds_extsem_exported(int api, uintptr_t semaphore, int fd);
/* `api` imported the descriptor `id` as its semaphore object `handle` (the
 * export is consumed: the importer owns the descriptor). */
void ds_extsem_imported(int api, uintptr_t handle, const ds_file_id *id);
/* The exporter's API and semaphore that an import object stands for: the
 * event its signals and waits are; false: not linked. */
bool ds_extsem_source(int api, uintptr_t handle, int *from_api, uintptr_t *semaphore);
void ds_extsem_destroyed(int api, uintptr_t handle);
/* The exporter destroyed its semaphore: its exports and imports unlinked. */
void ds_extsem_semaphore_gone(int api, uintptr_t semaphore);

/* ---- timelines.c: timeline semaphores, a clock per value signalled ------- */
/* `api` made (or imported) the timeline semaphore `semaphore`, its counter
 * at `initial` (0 where unknown); it is known by both from then on, until
 * ds_timeline_destroyed. */
void ds_timeline_created(int api, uintptr_t semaphore, uint64_t initial);
bool ds_timeline_is(int api, uintptr_t semaphore);
/* Its signals forgotten, with their events. */
void ds_timeline_destroyed(int api, uintptr_t semaphore);
/* `api`'s stream signals `value` of `owner`'s semaphore: an event recorded
 * there. */
void ds_timeline_signalled(int owner, uintptr_t semaphore, uint64_t value, int api,
                           uintptr_t stream, bool ptsz);
/* `api`'s stream waits for `value`: for each signal of a value up to it,
 * and, where none submitted yet reaches it, for the first that will. */
void ds_timeline_waited(int owner, uintptr_t semaphore, uint64_t value, int api,
                        uintptr_t stream, bool ptsz);
/* The host waited for `value` (or read a counter at least that): each
 * signal up to it merged into the host's clock, then forgotten. */
void ds_timeline_host_waited(int owner, uintptr_t semaphore, uint64_t value);
/* The host waited for `api`'s stream (0: every one of its streams, for an
 * API whose streams are never 0, as Vulkan's queues) to be idle: the
 * signals made there forgotten (the host's clock covers them). */
void ds_timeline_stream_idle(int api, uintptr_t stream);

/* ---- sync.c: the happens-before model over streams ---------------------- */
bool ds_sync_enabled(void);
/* `api`: the device API's index; its descriptor names the default streams'
 * handles and makes the barriers DLSHIM_SYNC=enforce inserts. */
void ds_sync_stream_created(int api, uintptr_t stream, bool non_blocking);
void ds_sync_stream_destroyed(int api, uintptr_t stream);
/* `ptsz`: the call is a per-thread-default-stream variant (stream 0 means
 * this thread's default stream). */
void ds_sync_event_recorded(int api, uintptr_t event, uintptr_t stream, bool ptsz);
void ds_sync_event_destroyed(int api, uintptr_t event);
void ds_sync_stream_waits(int api, uintptr_t stream, uintptr_t event, bool ptsz);
void ds_sync_host_waits_stream(int api, uintptr_t stream, bool ptsz);
void ds_sync_host_waits_event(int api, uintptr_t event);
void ds_sync_host_waits_all(int api);
/* The two above for an event of another family: a semaphore `event_api`
 * exported and `api` imported (ds_extsem_source), recorded on or waited for
 * by `api`'s stream. */
void ds_sync_shared_recorded(int event_api, uintptr_t event, int api, uintptr_t stream,
                             bool ptsz);
void ds_sync_shared_waits(int api, uintptr_t stream, bool ptsz, int event_api, uintptr_t event);
/* An operation about to be queued on `stream` touching ranges r[0..n);
 * n < 0: a launch whose buffers are unknown.  Checks (or, enforced, fixes)
 * the handoffs it is the first use of, then ticks the stream's clock. */
void ds_sync_op(int api, uintptr_t stream, bool ptsz, const ds_range *r, int n,
                const void *caller);
/* ds_sync_op, ds_sync_event_recorded and ds_sync_stream_waits, where they
 * can be done without a call (the stream settled, no handoff waiting, the
 * spin locks free, the event in its home slot): true when done; false when nothing was done and the call above must
 * be made.  Inlined into the hooks: a hot wrapper's way that calls nothing
 * but the real function (device.h, DS_HOT). */
bool ds_sync_op_now(int api, uintptr_t stream, bool ptsz, const ds_range *r, int n);
bool ds_sync_event_recorded_now(int api, uintptr_t event, uintptr_t stream, bool ptsz);
bool ds_sync_stream_waits_now(int api, uintptr_t stream, uintptr_t event, bool ptsz);

/* ---- copies.c: copy accounting ------------------------------------------ */
/* A transfer of `bytes` (direction: enum ds_copy_dir).  Logged when it
 * touches a tracked allocation or a share (only a share when needs_share:
 * host memcpy).  `caller` is a return address in the copying module. */
void ds_copy_record(uintptr_t dst, uintptr_t src, uint64_t bytes, int direction,
                    bool needs_share, const void *caller);
/* Whether ds_copy_record of this device copy (needs_share false) would only
 * count it again, as ds_copy_repeat does: the same copy as this thread's
 * last, with nothing changed since.  Inlined into the hooks, as
 * ds_sync_op_now. */
bool ds_copy_is_repeat(uintptr_t dst, uintptr_t src, uint64_t bytes, int direction);
void ds_copy_repeat(uint64_t bytes);

/* ---- host_frees.c: host memory freed under a live share ------------------ */
/* How many reasons there are now to look at a host free: the live shares
 * the index holds (shares.c), and capsules dying under watch.  0, the
 * common case, lets a free through at one load. */
extern atomic_uint ds_frees_watched;
enum ds_host_free { DS_HOST_FREE, DS_HOST_REALLOC, DS_HOST_MUNMAP };
/* Before the program frees [p, p + bytes) (`how`: enum ds_host_free;
 * `caller`: a return address in the freeing module): DS_FREE_FORWARD, or,
 * where a live share lies in it and DLSHIM_ON_ERROR=protect, DS_FREE_DEFER
 * (the shim frees it, through `release`, once the last share in it ends).
 * Reports the violation. */
int ds_host_free_check(uintptr_t p, uint64_t bytes, int how, const void *caller);
/* The host free family watches frees from now on (its hooks are in place):
 * the live shares are indexed by their bytes. */
void ds_host_frees_arm(void);
/* Whether a live share lies in [p, p + bytes) (nothing reported). */
bool ds_host_shared(uintptr_t p, uint64_t bytes);
/* The host free family's own free, for what the shim deferred. */
void ds_host_frees_set_release(void (*release)(uintptr_t p, uint64_t bytes, int how));
/* Called once, at the first export of the process (outside every lock):
 * what only a program that shares tensors needs (the host free hooks). */
void ds_tensor_on_first_export(void (*fn)(void));

/* ---- unloads.c: a library unloaded under a live share --------------------- */
/* Whether a live share's deleter lies in [lo, hi) (a library's code). */
bool ds_unload_holds(uintptr_t lo, uintptr_t hi);
/* The library at [lo, hi) was unloaded, or (handle given) is about to be:
 * reports the live shares whose deleter it holds.  DS_FREE_DEFER (protect,
 * handle given): it stays loaded, and its handle is closed through the
 * family's `release` once the last of them is released. */
int ds_unload_check(uintptr_t lo, uintptr_t hi, const char *library, void *handle);
void ds_unloads_set_release(void (*release)(void *handle));

/* ---- tensor.c: the DLPack ownership ledger ------------------------------ */
/* `api`: the interned name of the route the handoff took ("capsule",
 * "exchange_api", ...), which its event shows; DS_NAME_UNKNOWN shows none. */
void ds_tensor_export(void *managed, bool versioned, const char *producer, uint16_t api);
void ds_tensor_import(void *managed, bool versioned, const char *consumer, uint16_t api);
/* The same for a producer/consumer already interned (ds_module_id_at). */
void ds_tensor_export_by(void *managed, bool versioned, uint16_t producer, uint16_t api);
/* The same, unless the struct is not well formed: then nothing is recorded
 * or reported, and false returned (a producer may fill it in after making
 * its capsule; the caller exports it when it is handed over). */
bool ds_tensor_export_when_filled(void *managed, bool versioned, uint16_t producer, uint16_t api);
void ds_tensor_import_by(void *managed, bool versioned, uint16_t consumer, uint16_t api);
/* The producer's holder of an unconsumed tensor (a capsule) is about to be
 * destroyed: host frees are watched for the tensor's struct and data until
 * ds_tensor_dropped, which decides what its death was.  A release through
 * the deleter is one; without it, the tensor's memory freed is one too
 * (JAX's destructor frees it without calling the deleter); neither, where
 * host frees are watched, is a leak (violation `leak`: the holder died and
 * the tensor stays outstanding); where they are not, nothing is said.
 * `leaving`: the holder died as its program ends (an interpreter finalizing
 * frees what its modules held), and a tensor neither released nor freed
 * then is outstanding at exit, as the summary says, not a leak. */
typedef struct ds_drop_watch { /* on the caller's stack, from one to the other */
    struct ds_drop_watch *outer;
    uintptr_t tensor, data, end;
    bool freed;
} ds_drop_watch;
void ds_tensor_drop_watch(void *managed, ds_drop_watch *w);
void ds_tensor_dropped(void *managed, ds_drop_watch *w, bool leaving);
/* A hook family that knows more about a release than the deleter call shows
 * registers an observer, asked (outside every lock) before each release. */
typedef struct ds_release_context {
    /* A consumer that took the tensor but whose import can only be seen
     * after this release (it lets the tensor go before it marks it taken):
     * recorded as its import of a copy, unless it is the producer. */
    uint16_t taker, taker_api;
    /* The tensor's consumer lets it go inside the very call that imported
     * it: it kept a copy (counted as one). */
    bool copy_on_import;
    /* The taker lets it go inside the call that took it (a copy, once it
     * marks the capsule taken), not in a later one (no import at all). */
    bool taken_in_call;
    /* The producer's own holder (a capsule's destructor) lets it go. */
    bool by_producer;
} ds_release_context;
/* The taker that released a tensor (ds_release_context.taker) has now
 * marked its capsule taken: the import of a copy, counted now. */
void ds_tensor_taken_after_release(void *managed, uint16_t taker, uint16_t api);
typedef void (*ds_release_observer)(uintptr_t tensor, ds_release_context *ctx);
void ds_tensor_set_release_observer(ds_release_observer fn);

/* ---- stats.c: for dlshim_get_status ------------------------------------- */
uint64_t ds_stats_violations(void);
/* The latest violation (its kind and source line, DS_WHERE_MAX bytes), kept
 * for dlshim_status; false when there was none. */
bool ds_stats_latest_violation(int *kind, char *where);
/* What the shim has counted so far (walks the records, every registry shard
 * taken a moment). */
typedef struct ds_status_counts {
    uint64_t outstanding; /* shares exported and never released, now */
    uint64_t shares, copies, bytes_shared, bytes_copied, barriers_inserted;
    uint64_t violations[DS_VIO_COUNT]; /* by kind */
} ds_status_counts;
void ds_stats_now(ds_status_counts *now);

/* ==== start: the shim's state, the families, the end ====================== */
/* ---- hook families (families.c) ------------------------------------------ */
/* What a hook family declares (hooks/hooks.h: DS_FAMILY): the core installs
 * the families it finds, in order, and names none of them. */
typedef struct __attribute__((aligned(sizeof(void *)))) ds_family {
    const char *option;     /* its DLSHIM_HOOKS name; NULL: always installed */
    bool optional;          /* off unless DLSHIM_HOOKS names it */
    int order;              /* lower installs first */
    void (*install)(void);  /* registers its GOT hooks and descriptors */
    void (*started)(void);  /* after start-up completed; may be NULL */
} ds_family;

/* Whether DLSHIM_HOOKS turns on the family named `option`. */
bool ds_hook_option_on(const char *option);
/* True when the shim is initialised and tracking, false when disabled, still
 * initialising on this thread, or a shim lock is held by this thread (a
 * signal handler or deleter re-entering the shim): callers then forward
 * untouched.  Initialises on first use, from any thread.  Every hooked call
 * asks, so the settled answer is inline and the rest in ds_active_slow. */
extern atomic_bool ds_tracking; /* state is ACTIVE (init.c keeps the two together) */
bool ds_active_slow(void);
static inline bool ds_active(void)
{
    if (atomic_load_explicit(&ds_tracking, memory_order_acquire))
        return ds_locks_held == 0;
    return ds_active_slow();
}
/* ds_active() where it is settled and true, without a call: false means ask
 * ds_active(). */
static inline bool ds_active_now(void)
{
    return atomic_load_explicit(&ds_tracking, memory_order_acquire) && ds_locks_held == 0;
}
/* Writes the leak report and the summary, once: at exit (`now` false: then
 * DLSHIM_EXITCODE applies too) or as the process leaves without exit
 * handlers (`now`: _exit; async-signal-safe, every lock only tried, so what
 * a lock held elsewhere guards is left out and the summary says `partial`).
 * A forked child, or a process leaving through _exit, that did nothing the
 * shim tracks writes nothing. */
void ds_finish(bool now);
/* Starts a shim that was loaded into a running process (dlshim_attach):
 * `options` holds "DLSHIM_X=value" lines, which override the environment.
 * 0: started now; 1: already tracking (preloaded, or attached before);
 * 2: disabled (DLSHIM_DISABLE, a secure-execution process); -1: an option
 * is unknown or its value not valid, and `why` says so as the
 * environment's warning would (nothing started). */
int ds_attach(const char *options, char *why, size_t cap);
/* Whether start-up came from ds_attach: the shim was loaded late, after the
 * C library in every lookup scope, so its exports interpose nothing. */
bool ds_attached(void);

#endif /* DS_SHIM_H */
