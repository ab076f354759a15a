/*
 * device.h — the one shape of every device-API wrapper (CUDA runtime, CUDA
 * driver, HIP).
 *
 * An API's functions are listed in a table, one line each (cuda_runtime.def,
 * cuda_driver.def, hip.def), and expanded twice by its file: once into
 * wrappers with the macros below, once into its GOT hook list.  A line says
 * the function's name, its parameters and arguments, and what the model
 * does before the call and after a successful one:
 *
 *   DS_HOOK(name, (params), (args), before, after)
 *   DS_HOT(name, (params), (args), before, after)       the same, for a hot call
 *   DS_FREE(name, (params), (args), pointer, KIND)      a free the shim may stop
 *   DS_HOST_FN(name, (params), (args), stream, fn, data, KIND)
 *                                     a host function (KIND HOST_FN) or stream
 *                                     callback (STREAM_CALLBACK) queued on a stream
 *   DS_LOOKUP(name, (params), (args), after)            hands out function pointers
 *
 * and each of these forms with _PTSZ (DS_HOOK, DS_HOT also _PTDS) after it:
 * the same, and the function's per-thread-default-stream twin (see below);
 * DS_HOOK, DS_HOT and DS_HOST_FN also with _SPT, HIP's name for both.
 *
 * Every DS_HOOK, DS_HOT, DS_FREE and DS_HOST_FN wrapper finds the caller's own real
 * function; inside another device call (the runtime's own calls into the
 * driver underneath) it only forwards to it: the outermost call records.  The
 * outermost keeps errno; enters the nesting guard and asks ds_active()
 * (nothing runs with the shim disabled or inside one of its locks); runs
 * `before`; calls the real function; runs `after` if it succeeded; leaves;
 * returns its result and errno unchanged.  DS_LOOKUP wrappers skip the
 * guard: a lookup made inside the runtime must still hand out wrappers.
 *
 * The including file defines, before it includes its table:
 *   DS_RESULT  the API's status type     DS_OK       its success value
 *   DS_INVALID its invalid-value error   ds_api      its descriptor's index
 *   current_device(real)  the device the calling thread uses, asked of the
 *                         runtime that defines `real`
 * `before` and `after` are statements over the parameters, `caller` (the
 * return address), `real_` (the real function) and `ds_ptsz` (true in a
 * per-thread twin's wrapper: stream 0 is this thread's default stream);
 * the actions below are the usual ones (a DS_HOT line's are those with a
 * DS_NOW_ form).  (A
 * table's parameter and argument lists are pasted as they are, parentheses
 * included: hence the NOLINTs below.)
 */
#ifndef DS_DEVICE_H
#define DS_DEVICE_H

#include <errno.h>
#include <stddef.h>

#include "hooks.h"

/* ---- device.c: what the wrappers' actions call --------------------------- */
/* After a successful allocation that wrote its pointer (ptr_size bytes) to
 * out_ptr. */
void ds_device_allocated(int api, int kind, const void *out_ptr, size_t ptr_size, uint64_t bytes,
                         int device, uintptr_t stream, const void *caller);
/* Before forwarding a free: DS_FREE_FORWARD / DEFER / REFUSE. */
int ds_device_free_check(int api, int kind, uintptr_t ptr, const void *caller);
/* After a successful free. */
void ds_device_freed(int api, uintptr_t ptr, const void *caller);
/* A stream the API wrote to *out_stream (ptr_size bytes) was created. */
void ds_device_stream_created(int api, const void *out_stream, size_t ptr_size, bool non_blocking);
/* Before queuing an operation on `stream` that touches r[0..n) (n < 0: a
 * launch, buffers unknown): the stream model. */
static inline void ds_device_op(int api, uintptr_t stream, bool ptsz, const ds_range *r, int n,
                                const void *caller)
{
    ds_sync_op(api, stream, ptsz, r, n, caller);
}
/* A copy about to be queued: the stream model and copy accounting (inline:
 * every copy passes here). */
static inline void ds_device_copy(int api, uintptr_t stream, bool ptsz, uintptr_t dst,
                                  uintptr_t src, uint64_t bytes, uint64_t dst_span,
                                  uint64_t src_span, int direction, const void *caller)
{
    ds_range r[2] = {{.start = src, .len = src_span},
                     {.start = dst, .len = dst_span, .write = true}};
    ds_sync_op(api, stream, ptsz, r, 2, caller);
    ds_copy_record(dst, src, bytes, direction, false, caller);
}
/* ds_device_copy's way that calls nothing (DS_NOW_COPY): a copy this thread
 * repeats, on a settled stream.  Whether it repeats is asked first, as it
 * changes nothing, and the stream model's way acts once it can.  The source
 * is left out: a read matters only to a waiting handoff, and while one
 * waits that way does nothing. */
__attribute__((always_inline)) static inline bool ds_device_copy_now(int api, uintptr_t stream,
                                                                     bool ptsz, uintptr_t dst,
                                                                     uintptr_t src, uint64_t bytes,
                                                                     int direction)
{
    if (!ds_copy_is_repeat(dst, src, bytes, direction))
        return false;
    ds_range w = {.start = dst, .len = bytes, .write = true};
    if (!ds_sync_op_now(api, stream, ptsz, &w, 1))
        return false;
    ds_copy_repeat(bytes);
    return true;
}
/* External memory (see EXTMEM_* below). */
void ds_device_extmem_importing(const void *type, size_t type_size, const int *fd, int fd_type,
                                int timeline_type);
void ds_device_extmem_imported(int api, const void *out, size_t handle_size, bool semaphore);
void ds_device_extmem_mapped(int api, const void *out_ptr, size_t ptr_size, uintptr_t mem,
                             const unsigned long long *offset, const unsigned long long *size,
                             int device, const void *caller);
void ds_device_extsem_destroyed(int api, uintptr_t handle);
void ds_device_semaphores(int api, const void *sems, size_t handle_size, const void *params,
                          size_t params_size, size_t value_at, unsigned n, uintptr_t stream,
                          bool ptsz, bool signal);
/* Before queuing host function *fn with argument *data on `stream`: puts
 * the shim's trampoline and its slot in their place and returns the slot,
 * or NULL (left as they are).  `kind`: what *fn is, and how it is called
 * (DS_HOST_FN_*).  A slot whose call failed is given back. */
enum { DS_HOST_FN_HOST_FN, DS_HOST_FN_STREAM_CALLBACK };
void *ds_device_host_fn(int api, uintptr_t stream, bool ptsz, int kind, void (**fn)(void),
                        void **data);
void ds_device_host_fn_unused(void *slot);
/* The direction of a cudaMemcpyKind / hipMemcpyKind value. */
int ds_copy_kind_direction(int kind);
/* The bytes a pitched region of `height` rows of `width` bytes spans. */
uint64_t ds_pitched_span(size_t pitch, size_t width, size_t height);
/* The row pitch an allocation wrote to *pitch, times its rows. */
uint64_t ds_pitched_bytes(const size_t *pitch, size_t height);
/* Wraps a function pointer a lookup wrote to *fn when `name` is a hook. */
void ds_device_lookup_result(const char *name, void **fn, const void *caller);
/* The API function `name` from the same runtime as the real functions the
 * program called (the first of *known[0..n) that is set): for the calls
 * the shim makes itself. */
void *ds_device_fn(void **const *known, size_t n, const char *name);

/* ---- what each API's file defines with its own types ------------------------ */
/* current_device(real): the device the calling thread uses, asked of the
 * runtime that defines `real` (get: cudaGetDevice, cuCtxGetDevice, …). */
#define DS_CURRENT_DEVICE(get, Device)                                                        \
    static int current_device(const void *real)                                               \
    {                                                                                         \
        static __typeof__(get) *get_;                                                         \
        __typeof__(get) *g = DS_LAZY(get_, ds_resolve_beside(real, #get));                    \
        Device d = 0;                                                                         \
        return g && g(&d) == DS_OK ? (int)d : 0;                                              \
    }

/* barrier(producer, consumer) for the API's descriptor: an event recorded
 * on the producer's stream, waited for on the consumer's, then destroyed
 * (it lives until the wait is satisfied).  The API's own functions, found
 * beside the real functions `known` points to (an array of &real_name). */
#define DS_BARRIER(Stream, Event, create, record, wait, destroy, no_timing, known)            \
    static bool barrier(uintptr_t producer, uintptr_t consumer)                               \
    {                                                                                         \
        static __typeof__(create) *create_;                                                   \
        static __typeof__(record) *record_;                                                   \
        static __typeof__(wait) *wait_;                                                       \
        static __typeof__(destroy) *destroy_;                                                 \
        size_t n_ = DS_ARRAY_LEN(known);                                                      \
        __typeof__(create) *c = DS_LAZY(create_, ds_device_fn(known, n_, #create));           \
        __typeof__(record) *r = DS_LAZY(record_, ds_device_fn(known, n_, #record));           \
        __typeof__(wait) *w = DS_LAZY(wait_, ds_device_fn(known, n_, #wait));                 \
        __typeof__(destroy) *d = DS_LAZY(destroy_, ds_device_fn(known, n_, #destroy));        \
        Event e;                                                                              \
        if (!c || !r || !w || !d || c(&e, no_timing) != DS_OK)                                \
            return false;                                                                     \
        bool ok = r(e, (Stream)producer) == DS_OK && w((Stream)consumer, e, 0) == DS_OK;      \
        d(e);                                                                                 \
        return ok;                                                                            \
    }

/* release(base, kind) for the descriptor: a free the shim deferred, made with
 * the API's host or device free (both wrapped in the table). */
#define DS_RELEASE(free_device, free_host, Pointer)                                           \
    static void release(uintptr_t base, int kind)                                             \
    {                                                                                         \
        if (kind == DS_ALLOC_HOST) {                                                          \
            __typeof__(real_##free_host) f = DS_LAZY(                                        \
                real_##free_host, ds_resolve_real(#free_host, (void *)wrap_##free_host));    \
            if (f)                                                                            \
                f((void *)base);                                                              \
        } else {                                                                              \
            __typeof__(real_##free_device) f = DS_LAZY(                                      \
                real_##free_device, ds_resolve_real(#free_device, (void *)wrap_##free_device)); \
            if (f)                                                                            \
                f((Pointer)base); /* also right for stream-ordered allocations */             \
        }                                                                                     \
    }

/* ---- the actions ----------------------------------------------------------- */
#define P(x) ((uintptr_t)(x))
#define NOTHING ((void)0)
#define ALLOCATED(KIND, out, bytes, stream)                                                   \
    ds_device_allocated(ds_api, DS_ALLOC_##KIND, out, sizeof(*(out)), bytes,                  \
                        current_device((const void *)real_), P(stream), caller)
#define STREAM_CREATED(out, non_blocking) \
    ds_device_stream_created(ds_api, out, sizeof(*(out)), non_blocking)
#define STREAM_DESTROYED(s) ds_sync_stream_destroyed(ds_api, P(s))
#define EVENT_RECORDED(e, s) ds_sync_event_recorded(ds_api, P(e), P(s), ds_ptsz)
#define EVENT_DESTROYED(e) ds_sync_event_destroyed(ds_api, P(e))
#define STREAM_WAITS(s, e) ds_sync_stream_waits(ds_api, P(s), P(e), ds_ptsz)
#define HOST_WAITS(s) ds_sync_host_waits_stream(ds_api, P(s), ds_ptsz)
#define HOST_WAITS_EVENT(e) ds_sync_host_waits_event(ds_api, P(e))
#define HOST_WAITS_ALL ds_sync_host_waits_all(ds_api)
/* A synchronous call is done when it returns: the legacy stream's work (a
 * _ptds call's: this thread's default stream's). */
#define SYNCED HOST_WAITS(0)
#define COPY(dst, src, bytes, direction, stream)                                              \
    ds_device_copy(ds_api, P(stream), ds_ptsz, P(dst), P(src), bytes, bytes, bytes, direction,  \
                   caller)
#define COPY_2D(dst, dpitch, src, spitch, width, height, direction, stream)                   \
    ds_device_copy(ds_api, P(stream), ds_ptsz, P(dst), P(src), (uint64_t)(width) * (height),  \
                   ds_pitched_span(dpitch, width, height),                                    \
                   ds_pitched_span(spitch, width, height), direction, caller)
#define FILL(dst, bytes, stream)                                                              \
    ds_device_op(ds_api, P(stream), ds_ptsz,                                                  \
                 &(ds_range){.start = P(dst), .len = (bytes), .write = true}, 1, caller)
/* External memory: the descriptor's file, read before the runtime takes it
 * over (only for `fd_type`: the other handle types name no file); the
 * import object; a buffer mapped from it, an alias of the exporter's
 * allocation from the descriptor's offset on. */
#define EXTMEM_IMPORTING(desc, fd_type)                                                       \
    ds_device_extmem_importing(&(desc)->type, sizeof((desc)->type), &(desc)->handle.fd,       \
                               fd_type, DS_NO_HANDLE_TYPE)
#define DS_NO_HANDLE_TYPE 0 /* no API numbers a handle type 0 */
#define EXTMEM_IMPORTED(out) ds_device_extmem_imported(ds_api, out, sizeof(*(out)), false)
#define EXTMEM_MAPPED(out, mem, desc)                                                         \
    ds_device_extmem_mapped(ds_api, out, sizeof(*(out)), P(mem), &(desc)->offset,             \
                            &(desc)->size, current_device((const void *)real_), caller)
/* External semaphores: the same, for a binary semaphore (`fd_type`, its
 * opaque file descriptor: another API's, Vulkan's vkGetSemaphoreFdKHR) or a
 * timeline one (`timeline_type`; DS_NO_HANDLE_TYPE: the API has none),
 * whose import object then stands for the exporter's semaphore (a
 * timeline one not linked is a timeline of the importer's), and an import
 * destroyed. */
#define EXTSEM_IMPORTING(desc, fd_type, timeline_type)                                        \
    ds_device_extmem_importing(&(desc)->type, sizeof((desc)->type), &(desc)->handle.fd,       \
                               fd_type, timeline_type)
#define EXTSEM_IMPORTED(out) ds_device_extmem_imported(ds_api, out, sizeof(*(out)), true)
#define EXTSEM_DESTROYED(sem) ds_device_extsem_destroyed(ds_api, P(sem))
/* Imported semaphores signalled (or waited for) on a stream: as events
 * (the exporter's where the import is linked to its export), a timeline
 * one's at the value of its params (`values`, an array as long as `sems`:
 * params.fence.value of each). */
#define SEMAPHORES(sems, values, n, stream, signal)                                           \
    ds_device_semaphores(ds_api, sems, sizeof(*(sems)), values, sizeof(*(values)),           \
                         offsetof(__typeof__(*(values)), params.fence.value), n, P(stream),  \
                         ds_ptsz, signal)
/* A kernel: its buffers are unknown, so it counts as the calling module's
 * use of everything it imported. */
#define LAUNCH(stream) ds_device_op(ds_api, P(stream), ds_ptsz, NULL, -1, caller)

/* The ways of the actions above that call nothing, for DS_HOT's lines: true
 * when done, false when nothing was done (the action must be taken). */
#define DS_NOW_NOTHING true
#define DS_NOW_COPY(dst, src, bytes, direction, stream) \
    ds_device_copy_now(ds_api, P(stream), ds_ptsz, P(dst), P(src), bytes, direction)
#define DS_NOW_FILL(dst, bytes, stream)                                                       \
    ds_sync_op_now(ds_api, P(stream), ds_ptsz,                                                \
                   &(ds_range){.start = P(dst), .len = (bytes), .write = true}, 1)
#define DS_NOW_LAUNCH(stream) ds_sync_op_now(ds_api, P(stream), ds_ptsz, NULL, -1)
#define DS_NOW_EVENT_RECORDED(e, s) ds_sync_event_recorded_now(ds_api, P(e), P(s), ds_ptsz)
#define DS_NOW_STREAM_WAITS(s, e) ds_sync_stream_waits_now(ds_api, P(s), P(e), ds_ptsz)

/* ---- the wrapper shapes ------------------------------------------------------ */
/* What every DS_HOOK, DS_HOT and DS_FREE wrapper is: a small function without
 * a frame of its own that, inside another device call, only forwards to the
 * caller's own real function (the usual global one at once, else through
 * forward_, which asks which), and else enters the nesting guard and hands
 * over to the body.  The caller reaches forward_ and the body in
 * ds_device_caller: the body's is written once the guard is entered, when
 * any other call on this thread, a signal handler's too, is an inner one
 * that leaves it alone. */
extern DS_TLS const void *ds_device_caller;
#define DS_WRAPPER_ENTRY(name, params, args)                                                 \
    static DS_RESULT(*real_##name) params; /* NOLINT(bugprone-macro-parentheses) */          \
    static DS_RESULT wrap_##name params; /* NOLINT(bugprone-macro-parentheses) */            \
    static DS_RESULT body_##name params; /* NOLINT(bugprone-macro-parentheses) */            \
    __attribute__((noinline)) static DS_RESULT forward_##name params                         \
    {                                                                                        \
        return ((__typeof__(real_##name))ds_got_original_slow(                               \
            (void *)wrap_##name, (void **)&real_##name, #name,                               \
            ds_device_caller)) args; /* NOLINT(bugprone-macro-parentheses) */                \
    }                                                                                        \
    static DS_RESULT wrap_##name params                                                      \
    {                                                                                        \
        if (ds_api_nested()) {                                                               \
            __typeof__(real_##name) f_ =                                                     \
                (__typeof__(real_##name))ds_got_global((void **)&real_##name);               \
            if (f_)                                                                          \
                return f_ args; /* NOLINT(bugprone-macro-parentheses) */                     \
            ds_device_caller = __builtin_return_address(0);                                 \
            return forward_##name args; /* NOLINT(bugprone-macro-parentheses) */             \
        }                                                                                    \
        ds_api_enter();                                                                      \
        ds_device_caller = __builtin_return_address(0);                                     \
        return body_##name args; /* NOLINT(bugprone-macro-parentheses) */                    \
    }
/* A body (`fn`), entered in the guard: it begins with the caller, the real
 * function (`real_`), errno kept and ds_active() asked once (`on`), and ends
 * handing back the result `r_` and errno. */
#define DS_BODY_BEGIN(fn, name, pt, params)                                                  \
    __attribute__((noinline)) static DS_RESULT fn params                                     \
    {                                                                                        \
        const bool ds_ptsz = (pt);                                                           \
        const void *caller = ds_device_caller;                                               \
        __typeof__(real_##name) real_ = (__typeof__(real_##name))ds_got_original(            \
            (void *)wrap_##name, (void **)&real_##name, #name, caller);                      \
        int errno_ = errno;                                                                  \
        bool on = ds_active();
#define DS_WRAPPER_END                                                                       \
        ds_api_depth = 0; /* the outermost call leaves the guard as it entered it */         \
        errno = errno_;                                                                      \
        (void)caller;                                                                        \
        (void)ds_ptsz;                                                                       \
        return r_;                                                                           \
    }
/* `before`, the real call, and `after` on success, each action with errno
 * as the caller left it or as the real function left it.  (An action passes
 * through here, expanded: no comma outside its parentheses.) */
#define DS_HOOK_CALL(args, before, after)                                                    \
        if (on) {                                                                            \
            before;                                                                          \
        }                                                                                    \
        errno = errno_;                                                                      \
        DS_RESULT r_ = real_ args;                                                           \
        errno_ = errno;                                                                      \
        if (on && r_ == DS_OK) {                                                             \
            after;                                                                           \
        }

#define DS_HOOK_(name, pt, params, args, before, after)                                      \
    DS_WRAPPER_ENTRY(name, params, args)                                                     \
    DS_BODY_BEGIN(body_##name, name, pt, params)                                             \
        DS_HOOK_CALL(args, before, after)                                                    \
    DS_WRAPPER_END

/* A hot call (a launch, an async copy or fill, an event record or wait): a
 * DS_HOOK whose body tries first its actions' ways that call nothing
 * (DS_NOW_*, pasted onto the action's name).  When the real function is the global
 * definition, the shim is active and `before` is done that way, the body
 * keeps no errno (nothing it does touches it) and saves no register that
 * the real call does not need; `after` is then done that way too, or else
 * there and then, errno kept around it.  Anything else before the real call
 * goes the general way: general_, a DS_HOOK body. */
#define DS_HOT_(name, pt, params, args, before, after, now_before, now_after)              \
    DS_WRAPPER_ENTRY(name, params, args)                                                     \
    DS_BODY_BEGIN(general_##name, name, pt, params)                                          \
        DS_HOOK_CALL(args, before, after)                                                    \
    DS_WRAPPER_END                                                                           \
    __attribute__((noinline)) static DS_RESULT body_##name params                            \
    {                                                                                        \
        const bool ds_ptsz = (pt);                                                           \
        __typeof__(real_##name) real_ =                                                      \
            (__typeof__(real_##name))ds_got_global((void **)&real_##name);                   \
        if (!real_ || !ds_active_now() || !(now_before))                                     \
            return general_##name args; /* NOLINT(bugprone-macro-parentheses) */             \
        DS_RESULT r_ = real_ args;      /* NOLINT(bugprone-macro-parentheses) */             \
        if (r_ == DS_OK && !(now_after)) {                                                   \
            const void *caller = ds_device_caller;                                           \
            int errno_ = errno;                                                              \
            after;                                                                           \
            errno = errno_;                                                                  \
            (void)caller;                                                                    \
        }                                                                                    \
        ds_api_depth = 0;                                                                    \
        (void)ds_ptsz;                                                                       \
        return r_;                                                                           \
    }

/* A host function (or the older stream callback) queued on a stream.  The
 * driver runs it once the stream has done the work queued before it, and a
 * program may learn so from it alone (XLA marks a buffer ready from one,
 * then reads the buffer on another stream with no wait): the shim's
 * trampoline runs in its place, tells the stream model, then calls it
 * (ds_device_host_fn).  The function pointer passes as the generic
 * void (*)(void), which ds_device_host_fn casts back by KIND. */
#define DS_HOST_FN_(name, pt, params, args, stream, fn, data, KIND)                          \
    DS_WRAPPER_ENTRY(name, params, args)                                                     \
    DS_BODY_BEGIN(body_##name, name, pt, params)                                             \
        void *slot_ = on ? ds_device_host_fn(ds_api, P(stream), ds_ptsz, DS_HOST_FN_##KIND, \
                                             (void (**)(void))&(fn), &(data))                \
                         : NULL;                                                             \
        errno = errno_;                                                                      \
        DS_RESULT r_ = real_ args; /* NOLINT(bugprone-macro-parentheses) */                  \
        errno_ = errno;                                                                      \
        if (slot_ && r_ != DS_OK)                                                            \
            ds_device_host_fn_unused(slot_);                                                 \
    DS_WRAPPER_END

/* A free that the shim may defer (it reports success, and frees at the last
 * release of what is shared in it) or refuse (the API's invalid-value
 * error), under DLSHIM_ON_ERROR=protect. */
#define DS_FREE_(name, pt, params, args, pointer, KIND)                                      \
    DS_WRAPPER_ENTRY(name, params, args)                                                     \
    DS_BODY_BEGIN(body_##name, name, pt, params)                                             \
        int action_ = on ? ds_device_free_check(ds_api, DS_ALLOC_##KIND, P(pointer), caller) \
                         : DS_FREE_FORWARD;                                                  \
        errno = errno_;                                                                      \
        DS_RESULT r_ = action_ == DS_FREE_DEFER      ? DS_OK                                 \
                       : action_ != DS_FREE_FORWARD ? DS_INVALID                             \
                                                    : real_ args; /* NOLINT */               \
        errno_ = errno;                                                                      \
        if (on && action_ == DS_FREE_FORWARD && r_ == DS_OK)                                 \
            ds_device_freed(ds_api, P(pointer), caller);                                     \
    DS_WRAPPER_END

/* A lookup: no nesting guard, since a lookup made inside the runtime must
 * still hand out wrappers. */
#define DS_LOOKUP_(name, pt, params, args, after)                                            \
    static DS_RESULT(*real_##name) params; /* NOLINT(bugprone-macro-parentheses) */          \
    static DS_RESULT wrap_##name params                                                      \
    {                                                                                        \
        const bool ds_ptsz = (pt);                                                           \
        const void *caller = __builtin_return_address(0);                                   \
        DS_RESULT r_ = DS_REAL(wrap_##name, real_##name, #name) args; /* NOLINT */          \
        if (r_ == DS_OK) {                                                                   \
            int errno_ = errno;                                                              \
            if (ds_active()) {                                                               \
                after;                                                                       \
            }                                                                                \
            errno = errno_;                                                                  \
        }                                                                                    \
        (void)ds_ptsz;                                                                       \
        return r_;                                                                           \
    }

/* The rows' forms.  A function with a per-thread-default-stream twin (code
 * built with --default-stream per-thread, or CUDA_API_PER_THREAD_DEFAULT_-
 * STREAM, calls name_ptsz for a stream call and name_ptds for a synchronous
 * one; HIP's name_spt for either) is one row in its _PTSZ, _PTDS or _SPT
 * form: the wrapper of `name` and the twin's, generated from the same row.  The twin calls the real twin, and
 * its actions see ds_ptsz true (stream 0 is this thread's default stream);
 * `name`'s see it false, a constant the compiler folds away. */
#define DS_HOOK(name, params, args, before, after)                                           \
    DS_HOOK_(name, false, params, args, before, after)
/* (DS_HOT's DS_NOW_ names are pasted here, before `before` and `after`
 * expand.) */
#define DS_HOT(name, params, args, before, after)                                            \
    DS_HOT_(name, false, params, args, before, after, DS_NOW_##before, DS_NOW_##after)
#define DS_FREE(name, params, args, pointer, KIND)                                           \
    DS_FREE_(name, false, params, args, pointer, KIND)
#define DS_HOST_FN(name, params, args, stream, fn, data, KIND)                               \
    DS_HOST_FN_(name, false, params, args, stream, fn, data, KIND)
#define DS_LOOKUP(name, params, args, after) DS_LOOKUP_(name, false, params, args, after)
/* A row and its twin, `twin` the name with the twin's suffix pasted on. */
#define DS_HOOK_TWIN(name, twin, params, args, before, after)                                \
    DS_HOOK(name, params, args, before, after)                                               \
    DS_HOOK_(twin, true, params, args, before, after)
#define DS_HOT_TWIN(name, twin, params, args, before, after, now_before, now_after)          \
    DS_HOT_(name, false, params, args, before, after, now_before, now_after)                 \
    DS_HOT_(twin, true, params, args, before, after, now_before, now_after)
#define DS_FREE_PTSZ(name, params, args, pointer, KIND)                                      \
    DS_FREE(name, params, args, pointer, KIND)                                               \
    DS_FREE_(name##_ptsz, true, params, args, pointer, KIND)
#define DS_HOST_FN_TWIN(name, twin, params, args, stream, fn, data, KIND)                    \
    DS_HOST_FN(name, params, args, stream, fn, data, KIND)                                   \
    DS_HOST_FN_(twin, true, params, args, stream, fn, data, KIND)
#define DS_LOOKUP_PTSZ(name, params, args, after)                                            \
    DS_LOOKUP(name, params, args, after)                                                     \
    DS_LOOKUP_(name##_ptsz, true, params, args, after)
/* CUDA names a stream call's twin name_ptsz and a synchronous one's
 * name_ptds; HIP names both name_spt (-fgpu-default-stream=per-thread,
 * HIP_API_PER_THREAD_DEFAULT_STREAM). */
#define DS_HOOK_PTSZ(name, params, args, before, after)                                      \
    DS_HOOK_TWIN(name, name##_ptsz, params, args, before, after)
#define DS_HOOK_PTDS(name, params, args, before, after)                                      \
    DS_HOOK_TWIN(name, name##_ptds, params, args, before, after)
#define DS_HOOK_SPT(name, params, args, before, after)                                       \
    DS_HOOK_TWIN(name, name##_spt, params, args, before, after)
#define DS_HOT_PTSZ(name, params, args, before, after)                                       \
    DS_HOT_TWIN(name, name##_ptsz, params, args, before, after, DS_NOW_##before,             \
                DS_NOW_##after)
#define DS_HOT_SPT(name, params, args, before, after)                                        \
    DS_HOT_TWIN(name, name##_spt, params, args, before, after, DS_NOW_##before,              \
                DS_NOW_##after)
#define DS_HOST_FN_PTSZ(name, params, args, stream, fn, data, KIND)                          \
    DS_HOST_FN_TWIN(name, name##_ptsz, params, args, stream, fn, data, KIND)
#define DS_HOST_FN_SPT(name, params, args, stream, fn, data, KIND)                           \
    DS_HOST_FN_TWIN(name, name##_spt, params, args, stream, fn, data, KIND)

/* The API's descriptor (ds_device_api) from its barrier() and release():
 * its name, the DLPack device names of its allocations (device and
 * stream-ordered, pinned host, managed) and its two stream handles. */
#define DS_DEVICE_API(api_name, device, host, managed, legacy, per_thread)                    \
    static const ds_device_api api = {                                                        \
        .name = (api_name),                                                                   \
        .device_type = {[DS_ALLOC_DEVICE] = (device), [DS_ALLOC_ASYNC] = (device),            \
                        [DS_ALLOC_HOST] = (host), [DS_ALLOC_MANAGED] = (managed)},            \
        .legacy_stream = (uintptr_t)(legacy), .per_thread_stream = (uintptr_t)(per_thread),   \
        .barrier = barrier, .release = release}

#endif /* DS_DEVICE_H */
