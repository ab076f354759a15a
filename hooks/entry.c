/*
 * entry.c — any C or C++ function that hands DLPack tensors over, traced by
 * its signature (DLSHIM_ENTRY, DLSHIM_ENTRY_FILE; grammar in
 * shim/image/entry_spec.c and docs/entry-specs.md).
 *
 * Wraps: each function a spec names, with a libffi closure built from the
 * spec's types, installed in the GOT of every module that calls it (now and
 * after later dlopens) and handed out by dlsym.  Only call sites bound to
 * the definition the spec means are redirected.
 * Leaves out: calls a module makes to its own functions (no GOT entry),
 * variadic functions, structs passed by value.
 *
 * libffi (Debian's libffi8) is opened only when a spec is given: the shim
 * keeps no link dependency and costs nothing without specs.  The closure's
 * handler: tensors passed in with @export or @import are recorded before the
 * call (the callee may hand them on or release them), the call is forwarded
 * with ffi_call, a returned @export tensor is recorded after, and an `entry`
 * event (when DLSHIM_EVENTS asks) shows the arguments rendered by type.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "abi/ffi.h"
#include "hooks.h"

#define DS_ENTRIES_MAX 64
#define DS_ENTRY_FILE_MAX (64 * 1024)

static struct {
    __typeof__(ffi_prep_cif) *prep_cif;
    __typeof__(ffi_closure_alloc) *closure_alloc;
    __typeof__(ffi_prep_closure_loc) *prep_closure_loc;
    __typeof__(ffi_call) *call;
    ffi_type *types[DS_ET_V + 1];
} ffi;

typedef struct {
    ds_entry_spec spec;
    ffi_cif cif;
    ffi_type *arg_types[DS_ENTRY_ARGS_MAX];
    void *code;      /* the closure's entry point: the wrapper */
    void *real;      /* the definition the spec means */
    char owner[DS_NAME_MAX];
    bool pending, dead;
} entry;

static entry entries[DS_ENTRIES_MAX];
static int nentries;

/* ---- libffi, opened on demand ------------------------------------------------ */

static bool load_ffi(void)
{
    static int state; /* 0: not tried, 1: loaded, -1: unavailable */
    if (state)
        return state > 0;
    state = -1;
    void *(*glibc_dlopen)(const char *, int) =
        (void *(*)(const char *, int))ds_real_dlsym(RTLD_NEXT, "dlopen");
    void *h = glibc_dlopen ? glibc_dlopen("libffi.so.8", RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!h) {
        ds_diag("DLSHIM_ENTRY needs libffi.so.8 (Debian: libffi8); entry points are not traced");
        return false;
    }
#define SYM(field, name) *(void **)&ffi.field = ds_real_dlsym(h, name)
    SYM(prep_cif, "ffi_prep_cif");
    SYM(closure_alloc, "ffi_closure_alloc");
    SYM(prep_closure_loc, "ffi_prep_closure_loc");
    SYM(call, "ffi_call");
#undef SYM
    static const char *const type_syms[DS_ET_V + 1] = {
        [DS_ET_VOID] = "ffi_type_void",    [DS_ET_I8] = "ffi_type_sint8",
        [DS_ET_I16] = "ffi_type_sint16",   [DS_ET_I32] = "ffi_type_sint32",
        [DS_ET_I64] = "ffi_type_sint64",   [DS_ET_U8] = "ffi_type_uint8",
        [DS_ET_U16] = "ffi_type_uint16",   [DS_ET_U32] = "ffi_type_uint32",
        [DS_ET_U64] = "ffi_type_uint64",   [DS_ET_BOOL] = "ffi_type_uint8",
        [DS_ET_F32] = "ffi_type_float",    [DS_ET_F64] = "ffi_type_double",
        [DS_ET_PTR] = "ffi_type_pointer",  [DS_ET_STR] = "ffi_type_pointer",
        [DS_ET_T] = "ffi_type_pointer",    [DS_ET_V] = "ffi_type_pointer",
    };
    for (int t = 0; t <= DS_ET_V; t++)
        if (!(ffi.types[t] = ds_real_dlsym(h, type_syms[t])))
            return false;
    if (!ffi.prep_cif || !ffi.closure_alloc || !ffi.prep_closure_loc || !ffi.call)
        return false;
    state = 1;
    return true;
}

/* ---- the call ------------------------------------------------------------------ */

/* A value of `type` at p as field `key` (NULL in an array): an argument,
 * or a return slot, where libffi widens small integers to ffi_arg. */
static void render(ds_ev *e, const char *key, int type, const void *p, bool is_return)
{
    int64_t i = 0;
    uint64_t u = 0;
    switch (type) {
    case DS_ET_I8: i = is_return ? (int8_t) * (const ffi_sarg *)p : *(const int8_t *)p; break;
    case DS_ET_I16: i = is_return ? (int16_t) * (const ffi_sarg *)p : *(const int16_t *)p; break;
    case DS_ET_I32: i = is_return ? (int32_t) * (const ffi_sarg *)p : *(const int32_t *)p; break;
    case DS_ET_I64: i = *(const int64_t *)p; break;
    case DS_ET_U8:
    case DS_ET_BOOL: u = is_return ? (uint8_t) * (const ffi_arg *)p : *(const uint8_t *)p; break;
    case DS_ET_U16: u = is_return ? (uint16_t) * (const ffi_arg *)p : *(const uint16_t *)p; break;
    case DS_ET_U32: u = is_return ? (uint32_t) * (const ffi_arg *)p : *(const uint32_t *)p; break;
    case DS_ET_U64: u = *(const uint64_t *)p; break;
    default: break;
    }
    switch (type) {
    case DS_ET_VOID: ds_ev_str(e, key, NULL); return;
    case DS_ET_I8: case DS_ET_I16: case DS_ET_I32: case DS_ET_I64: ds_ev_int(e, key, i); return;
    case DS_ET_U8: case DS_ET_U16: case DS_ET_U32: case DS_ET_U64: ds_ev_uint(e, key, u); return;
    case DS_ET_BOOL: ds_ev_bool(e, key, u != 0); return;
    case DS_ET_F32: ds_ev_double(e, key, *(const float *)p); return;
    case DS_ET_F64: ds_ev_double(e, key, *(const double *)p); return;
    case DS_ET_STR: {
        char text[DS_NAME_MAX];
        const char *s = *(const char *const *)p;
        ds_safe_string(text, sizeof(text), s, "");
        ds_ev_str(e, key, s ? text : NULL);
        return;
    }
    default: ds_ev_hex(e, key, *(const uintptr_t *)p); return;
    }
}

static void hand_over(const entry *x, int type, int role, void *tensor)
{
    if (role == DS_ER_EXPORT)
        ds_tensor_export(tensor, type == DS_ET_V, x->owner, DS_NAME_ONCE("entry"));
    else if (role == DS_ER_IMPORT)
        ds_tensor_import(tensor, type == DS_ET_V, x->owner, DS_NAME_ONCE("entry"));
}

static void handler(ffi_cif *cif, void *ret, void **args, void *user)
{
    entry *x = user;
    const ds_entry_spec *s = &x->spec;
    int saved = errno;
    bool active = ds_active();
    if (active)
        for (int i = 0; i < s->nargs; i++)
            if (s->arg_role[i])
                hand_over(x, s->arg_type[i], s->arg_role[i], *(void **)args[i]);
    uint64_t t0 = ds_now_ns();
    errno = saved;
    ffi.call(cif, (void (*)(void))x->real, ret, args);
    saved = errno;
    uint64_t t1 = ds_now_ns();
    if (active && s->ret_role)
        hand_over(x, s->ret_type, s->ret_role, *(void **)ret);
    if (active && ds_event_wanted(DS_EV_ENTRY)) {
        ds_ev e;
        ds_ev_begin(&e, DS_EV_ENTRY);
        ds_ev_str(&e, "symbol", s->symbol);
        ds_ev_str(&e, "module", x->owner);
        ds_ev_open(&e, "args", '[');
        for (int i = 0; i < s->nargs; i++)
            render(&e, NULL, s->arg_type[i], args[i], false);
        ds_ev_close(&e);
        render(&e, "ret", s->ret_type, ret, true);
        ds_ev_uint(&e, "duration_ns", t1 - t0);
        ds_ev_end(&e);
    }
    errno = saved;
}

/* ---- specs ---------------------------------------------------------------------- */

static void add_spec(const ds_entry_spec *spec, void *arg)
{
    (void)arg;
    if (nentries == DS_ENTRIES_MAX) {
        ds_diag("DLSHIM_ENTRY: more than %d specs; %s is ignored", DS_ENTRIES_MAX, spec->symbol);
        return;
    }
    entries[nentries++] = (entry){.spec = *spec, .pending = true};
}

/* Where the spec's function is defined, if it is loaded. */
static void *find(const ds_entry_spec *s, bool *module_loaded)
{
    *module_loaded = true;
    if (!s->module[0])
        return ds_real_dlsym(RTLD_DEFAULT, s->symbol);
    void *(*glibc_dlopen)(const char *, int) =
        (void *(*)(const char *, int))ds_real_dlsym(RTLD_NEXT, "dlopen");
    int (*glibc_dlclose)(void *) = (int (*)(void *))ds_real_dlsym(RTLD_NEXT, "dlclose");
    void *h = glibc_dlopen ? glibc_dlopen(s->module, RTLD_LAZY | RTLD_NOLOAD) : NULL;
    if (!h) {
        *module_loaded = false;
        dlerror();
        return NULL;
    }
    void *f = ds_real_dlsym(h, s->symbol);
    glibc_dlclose(h);
    return f;
}

static bool build(entry *x)
{
    ds_entry_spec *s = &x->spec;
    for (int i = 0; i < s->nargs; i++)
        x->arg_types[i] = ffi.types[s->arg_type[i]];
    void *code = NULL;
    ffi_closure *closure = ffi.closure_alloc(sizeof(ffi_closure), &code);
    if (!closure || ffi.prep_cif(&x->cif, FFI_DEFAULT_ABI, (unsigned)s->nargs,
                                 ffi.types[s->ret_type], x->arg_types) != FFI_OK ||
        ffi.prep_closure_loc(closure, &x->cif, handler, x, code) != FFI_OK)
        return false;
    x->code = code;
    return true;
}

void ds_entry_resolve(void)
{
    for (int i = 0; i < nentries; i++) {
        entry *x = &entries[i];
        if (!x->pending || x->dead)
            continue;
        bool module_loaded;
        x->real = find(&x->spec, &module_loaded);
        if (!x->real) {
            if (module_loaded && x->spec.module[0]) {
                ds_diag("DLSHIM_ENTRY: %s defines no %s; that spec is ignored", x->spec.module,
                        x->spec.symbol);
                x->dead = true;
            }
            continue;
        }
        if (!build(x)) {
            ds_diag("DLSHIM_ENTRY: libffi could not wrap %s; it is not traced", x->spec.symbol);
            x->dead = true;
            continue;
        }
        ds_fmt(x->owner, sizeof(x->owner), "%s", ds_name(ds_caller_id(x->real)));
        x->pending = false;
        ds_got_hook hook = {x->spec.symbol, x->code, &x->real, x->real};
        ds_got_hooks_add(&hook, 1);
    }
}

static void read_file(const char *path)
{
    static char text[DS_ENTRY_FILE_MAX];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        const char *why = ds_errno_name(errno);
        ds_diag("DLSHIM_ENTRY_FILE %s cannot be read (%s)", path, why ? why : "error");
        return;
    }
    ssize_t n = read(fd, text, sizeof(text));
    close(fd);
    if (n < 0)
        return;
    if ((size_t)n == sizeof(text))
        ds_diag("DLSHIM_ENTRY_FILE %s: only its first %d bytes are read", path, DS_ENTRY_FILE_MAX);
    ds_entry_parse_list(text, (size_t)n, true, path, add_spec, NULL);
}

static void install(void)
{
    if (!ds_cfg.entry[0] && !ds_cfg.entry_file[0])
        return;
    if (!load_ffi())
        return;
    ds_entry_parse_list(ds_cfg.entry, strlen(ds_cfg.entry), false, "DLSHIM_ENTRY", add_spec, NULL);
    if (ds_cfg.entry_file[0])
        read_file(ds_cfg.entry_file);
    ds_entry_resolve();
    for (int i = 0; i < nentries; i++)
        if (entries[i].pending && !entries[i].dead)
            ds_diag("DLSHIM_ENTRY: %s is not loaded yet; it is traced if a module defining it is "
                    "loaded later", entries[i].spec.symbol);
}

/* Always on: it does nothing unless DLSHIM_ENTRY or DLSHIM_ENTRY_FILE names
 * specs. */
DS_FAMILY(entry, .order = DS_ORDER_OTHER, .install = install);
