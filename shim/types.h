/*
 * types.h — the structures shared between the core's files.
 * Framework-agnostic: DLPack, buffers, names, events; never a framework.
 */
#ifndef DS_TYPES_H
#define DS_TYPES_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlshim.h"

/* ---- options (options.def) ---------------------------------------------- */
#define DS_PATH_MAX PATH_MAX

enum ds_format { DS_FORMAT_TEXT, DS_FORMAT_JSONL };
enum ds_on_error { DS_ON_ERROR_WARN, DS_ON_ERROR_PROTECT, DS_ON_ERROR_ABORT };
enum ds_sync_mode { DS_SYNC_OFF, DS_SYNC_CHECK, DS_SYNC_ENFORCE };

#define DS_CTYPE_BOOL bool
#define DS_CTYPE_INT int64_t
#define DS_CTYPE_ENUM int
#define DS_CTYPE_EVENTS uint32_t
typedef struct ds_config {
#define DS_OPTION(field, NAME, TYPE, def, lo, hi, choices, doc) DS_FIELD_##TYPE(field)
#define DS_FIELD_BOOL(f) bool f;
#define DS_FIELD_INT(f) int64_t f; /* -1: unset */
#define DS_FIELD_ENUM(f) int f;
#define DS_FIELD_EVENTS(f) uint32_t f; /* bit per ds_event_id */
#define DS_FIELD_HOOKS(f) uint32_t f;  /* bit per DLSHIM_HOOKS name (families.c) */
#define DS_FIELD_PATH(f) char f[DS_PATH_MAX];
#define DS_FIELD_TEXT(f) char f[DS_PATH_MAX];
#include "options.def"
#undef DS_OPTION
#undef DS_FIELD_BOOL
#undef DS_FIELD_INT
#undef DS_FIELD_ENUM
#undef DS_FIELD_EVENTS
#undef DS_FIELD_HOOKS
#undef DS_FIELD_PATH
#undef DS_FIELD_TEXT
} ds_config;

/* ---- events (events.def) and violation kinds (violations.def) ----------- */
enum ds_event_id {
#define DS_EVENT(ID, name, frequent) DS_EV_##ID,
#include "events.def"
#undef DS_EVENT
    DS_EV_COUNT
};

enum ds_violation_kind {
#define DS_VIOLATION(ID, name) DS_VIO_##ID,
#include "violations.def"
#undef DS_VIOLATION
    DS_VIO_COUNT
};

/* ---- event writer (event.c) --------------------------------------------- */
/* Longest event line; also PIPE_BUF, so one line is one atomic pipe write. */
#define DS_LINE_MAX 4096
#define DS_EV_DEPTH 6
/* Room past a line's end where a generated writer's bounded fields may run
 * before it finds the line too long (flat.c). */
#define DS_EV_SLACK 1536

typedef struct ds_ev {
    char *p;           /* where the next byte goes */
    char *limit;       /* fields end before it (the reserve beyond holds the
                          brackets, "}" and "\n"); at buf once it overflowed */
    char *buf;         /* line, or a caller's larger buffer */
    char *fields;      /* text: where the first field goes (after the head) */
    uint64_t ns;       /* when it happened (t_ns) */
    int id;            /* ds_event_id */
    bool overflow;     /* the line did not fit: it is dropped, not cut */
    bool text;         /* built as the text line, not as JSON */
    char sep;          /* what precedes each value at the level open now */
    uint8_t depth;     /* open objects/arrays below the top level */
    char *opened[DS_EV_DEPTH + 1]; /* where each open level's bracket goes */
    char brackets[DS_EV_DEPTH + 1]; /* its opening bracket */
    char line[DS_LINE_MAX + DS_EV_SLACK]; /* storage for ordinary events */
} ds_ev;

/* ---- context (context.c) ------------------------------------------------ */
#define DS_WHERE_MAX 192  /* a source location, "file.py:LINE in function", NUL included */
#define DS_TEST_MAX 256   /* a test's id, NUL included */
#define DS_PYSTACK_MAX 16 /* most frames of DLSHIM_PYSTACK (they fit one event line) */

/* A source location as the interpreter's hook family keeps it: valid
 * while the calling thread goes on (copied at once), never NUL-terminated
 * for sure. */
typedef struct {
    const char *text;
    size_t len;   /* < DS_WHERE_MAX */
    bool plain;   /* printable ASCII without '"' or '\\': nothing to escape */
    bool spaced;  /* holds a space: quoted in text too */
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

/* ---- DLPack view (dlpack.c) --------------------------------------------- */
/* No framework supports more dimensions (NumPy 2 and PyTorch stop at 64). */
#define DS_MAX_NDIM 64
#define DS_NAME_MAX 48      /* producer/consumer names, NUL included */
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
    int32_t device_type;    /* DLDeviceType of the data */
    uintptr_t alloc_base;   /* the tracked allocation the data lies in; 0: none */
    uint32_t alloc_generation;
} ds_record;

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
     * its allocation's handle (NULL, or false: the handle itself). */
    int32_t tensor_device_type;
    bool (*memory_of)(uintptr_t handle, uintptr_t *memory);
    /* Names of the bits of ds_alloc_info.properties (NULL: none). */
    const char *const *property_names;
} ds_device_api;
/* What a hooked free must do (ds_alloc_free_check). */
enum { DS_FREE_FORWARD, DS_FREE_DEFER, DS_FREE_REFUSE };
#define DS_BACKTRACE_CAPTURE 64

/* Copy directions (copies.c); INFER: from what the two sides are. */
enum ds_copy_dir { DS_COPY_H2D, DS_COPY_D2H, DS_COPY_D2D, DS_COPY_H2H, DS_COPY_PEER, DS_COPY_INFER };

/* A byte range a device operation reads or writes (sync.c). */
typedef struct ds_range {
    uintptr_t start;
    uint64_t len;
    bool write;
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
     * Otherwise a view that freeing that one legally ends (a host mapping). */
    uintptr_t alias_of;
    uint32_t alias_generation;
    bool alias_holds;
} ds_alloc_info;

/* ---- ELF modules (elf.c) and GOT hooks (modules.c) ---------------------- */
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

/* ---- entry-point specs (entry_spec.c) ----------------------------------- */
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

#endif /* DS_TYPES_H */
