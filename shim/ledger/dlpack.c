/*
 * dlpack.c — reading, checking and naming DLPack structures.
 *
 * Every byte comes through ds_safe_read: a tensor pointer from the program
 * may be NULL, dangling or garbage, and checking it must never fault.  The
 * checks follow the DLPack spec (dlpack.h, v1.1): a versioned tensor of an
 * unknown major version may only have its deleter called, so nothing past
 * `flags` is read from one.  Only what is structurally wrong fails a check;
 * codes newer than this table are named by number (device99:0, code42_8).
 */
#include <string.h>

#include "ledger/ledger.h"

/* Device types by DLDeviceType value (dlpack.h 1.1); NULL: unassigned. */
static const char *const device_names[] = {
    [1] = "cpu",          [2] = "cuda",    [3] = "cuda_host", [4] = "opencl",
    [7] = "vulkan",       [8] = "metal",   [9] = "vpi",       [10] = "rocm",
    [11] = "rocm_host",   [12] = "ext_dev", [13] = "cuda_managed", [14] = "oneapi",
    [15] = "webgpu",      [16] = "hexagon", [17] = "maia",     [18] = "trn",
};

/* Type codes by DLDataTypeCode value (dlpack.h 1.1). */
static const char *const dtype_names[] = {
    "int", "uint", "float", "opaque", "bfloat", "complex", "bool",
    "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn",
    "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
    "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn",
};
#define DS_CODE_BOOL 6         /* kDLBool, absent from DLPack 0.6 headers */
#define DS_FIRST_NAMED_FLOAT 7 /* codes from here carry their width in the name */

static bool known_device(int32_t type)
{
    return type > 0 && type < (int32_t)DS_ARRAY_LEN(device_names) && device_names[type];
}

/* A name and a number, "cuda:1" or "float32": built by hand rather than by
 * ds_fmt, as every export event names its device and dtype, and the
 * general formatter would cost more than the rest of the event. */
static size_t name_and_number(char *out, size_t cap, const char *name, char sep, bool with_sep,
                              unsigned number)
{
    char digits[12];
    size_t d = sizeof(digits);
    for (unsigned v = number;; v /= 10) {
        digits[--d] = (char)('0' + v % 10);
        if (v < 10)
            break;
    }
    size_t n = strlen(name), len = n + with_sep + sizeof(digits) - d;
    if (len >= cap) /* cut as the formatter cuts (the callers' buffers always fit) */
        return with_sep ? ds_fmt(out, cap, "%s%c%u", name, sep, number)
                        : ds_fmt(out, cap, "%s%u", name, number);
    memcpy(out, name, n);
    if (with_sep)
        out[n++] = sep;
    memcpy(out + n, digits + d, sizeof(digits) - d);
    out[len] = '\0';
    return len;
}

void ds_device_name(char *out, size_t cap, DLDevice d)
{
    if (known_device((int32_t)d.device_type) && d.device_id >= 0)
        name_and_number(out, cap, device_names[d.device_type], ':', true, (unsigned)d.device_id);
    else
        ds_fmt(out, cap, "device%d:%d", (int)d.device_type, (int)d.device_id);
}

void ds_dtype_name(char *out, size_t cap, DLDataType d)
{
    size_t len;
    if (d.code >= DS_ARRAY_LEN(dtype_names))
        len = ds_fmt(out, cap, "code%u_%u", (unsigned)d.code, (unsigned)d.bits);
    else if (d.code >= DS_FIRST_NAMED_FLOAT || (d.code == DS_CODE_BOOL && d.bits == 8))
        len = ds_fmt(out, cap, "%s", dtype_names[d.code]);
    else
        len = name_and_number(out, cap, dtype_names[d.code], 0, false, d.bits);
    if (d.lanes != 1)
        ds_fmt(out + len, cap - len, "x%u", (unsigned)d.lanes);
}

int ds_flag_names(uint64_t flags, const char **out, int max)
{
    static const char *const names[64] = {"read_only", "is_copied", "subbyte_padded"};
    static const char *const bits[64] = {
        "bit0",  "bit1",  "bit2",  "bit3",  "bit4",  "bit5",  "bit6",  "bit7",  "bit8",  "bit9",
        "bit10", "bit11", "bit12", "bit13", "bit14", "bit15", "bit16", "bit17", "bit18", "bit19",
        "bit20", "bit21", "bit22", "bit23", "bit24", "bit25", "bit26", "bit27", "bit28", "bit29",
        "bit30", "bit31", "bit32", "bit33", "bit34", "bit35", "bit36", "bit37", "bit38", "bit39",
        "bit40", "bit41", "bit42", "bit43", "bit44", "bit45", "bit46", "bit47", "bit48", "bit49",
        "bit50", "bit51", "bit52", "bit53", "bit54", "bit55", "bit56", "bit57", "bit58", "bit59",
        "bit60", "bit61", "bit62", "bit63"};
    int n = 0;
    for (; flags && n < max; flags &= flags - 1) { /* set bits only, lowest first */
        int b = __builtin_ctzll(flags);
        out[n++] = names[b] ? names[b] : bits[b];
    }
    return n;
}

/* Logical size in bytes (dlpack.h's GetDataSize; packed sub-byte types round
 * the total, not each element).  False on overflow. */
static bool data_bytes(const ds_tensor_view *v, uint64_t *out)
{
    uint64_t numel = 1;
    for (int i = 0; i < v->t.ndim; i++)
        if (__builtin_mul_overflow(numel, (uint64_t)v->shape[i], &numel))
            return false;
    uint64_t elem_bits = (uint64_t)v->t.dtype.bits * v->t.dtype.lanes;
    bool packed = elem_bits < 8 && !(v->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED);
    uint64_t total;
    if (packed) {
        if (__builtin_mul_overflow(numel, elem_bits, &total))
            return false;
        *out = total / 8 + (total % 8 != 0);
        return true;
    }
    return !__builtin_mul_overflow(numel, (elem_bits + 7) / 8, out);
}

#define WHY(...) (ds_fmt(why, why_cap, __VA_ARGS__), false)

static bool check_tensor(ds_tensor_view *v, bool keep_strides, char *why, size_t why_cap)
{
    DLTensor *t = &v->t;
    const int64_t *shape = t->shape, *strides = t->strides;
    t->shape = NULL; /* until copied: never print the program's pointer */
    t->strides = NULL;
    if (t->ndim < 0)
        return WHY("ndim is %d, below zero", (int)t->ndim);
    if (t->ndim > DS_MAX_NDIM)
        return WHY("ndim is %d, above the %d dimensions any framework supports", (int)t->ndim,
                   DS_MAX_NDIM);
    size_t span = (size_t)t->ndim * sizeof(int64_t);
    if (t->ndim > 0 && !shape)
        return WHY("shape is NULL but ndim is %d", (int)t->ndim);
    if (ds_safe_read(v->shape, shape, span) != span)
        return WHY("the shape array at %p is not readable", (const void *)shape);
    t->shape = v->shape;
    for (int i = 0; i < t->ndim; i++)
        if (v->shape[i] < 0)
            return WHY("shape[%d] is %lld, below zero", i, (long long)v->shape[i]);
    if (strides) {
        /* Only an event shows the strides: otherwise proving them readable
         * is enough, and a page already proven needs no copy. */
        if (keep_strides || !ds_within_proven_page(ds_readable_pages, strides, span)) {
            if (ds_safe_read(v->strides, strides, span) != span)
                return WHY("the strides array at %p is not readable", (const void *)strides);
            t->strides = v->strides;
            v->has_strides = true;
        }
    }
    /* A device type or dtype code this table does not name is not an error:
     * DLPack adds codes (1.1 added the float8/6/4 types), and frameworks use
     * codes of their own; the events show them by number. */
    if (t->device.device_id < 0)
        return WHY("device id is %d, below zero", (int)t->device.device_id);
    if (t->dtype.bits == 0)
        return WHY("dtype has 0 bits");
    if (t->dtype.lanes == 0)
        return WHY("dtype has 0 lanes");
    if (!data_bytes(v, &v->bytes))
        return WHY("the tensor's size in bytes overflows 64 bits");
    if (!t->data && v->bytes > 0)
        return WHY("data is NULL but the tensor holds %llu bytes", (unsigned long long)v->bytes);
    return true;
}

/* A view of nothing read: what a struct that could not be read shows. */
static void unread(ds_tensor_view *v)
{
    v->readable = false;
    v->deleter = NULL;
    v->t = (DLTensor){0};
}

bool ds_dlpack_read_struct(const void *p, bool versioned, ds_tensor_view *v, char *why,
                           size_t why_cap)
{
    /* Field by field: a memset of the header was a `rep stos`, slow to
     * start for so few bytes.  The fields a read fills are cleared only
     * when it fails, and the arrays only as filled. */
    v->versioned = versioned;
    v->tensor_valid = v->has_strides = false;
    v->major = v->minor = 0;
    v->flags = 0;
    v->bytes = 0;
    if (!p)
        return unread(v), WHY("the tensor pointer is NULL");
    if (versioned) {
        DLManagedTensorVersioned m;
        if (ds_safe_read(&m, p, sizeof(m)) != sizeof(m))
            return unread(v), WHY("the tensor's memory at %p is not readable", p);
        v->readable = true;
        v->deleter = (void *)m.deleter;
        v->major = m.version.major;
        v->minor = m.version.minor;
        v->flags = m.flags;
        if (m.version.major == 0 || m.version.major > DLSHIM_DLPACK_MAJOR) {
            v->t = (DLTensor){0}; /* the version does not say what follows */
            if (m.version.major == 0)
                return WHY("a versioned tensor announces major version 0");
            return WHY("DLPack major version %u is above %u, so only its deleter may be used",
                       (unsigned)m.version.major, DLSHIM_DLPACK_MAJOR);
        }
        v->t = m.dl_tensor;
    } else {
        DLManagedTensor m;
        if (ds_safe_read(&m, p, sizeof(m)) != sizeof(m))
            return unread(v), WHY("the tensor's memory at %p is not readable", p);
        v->readable = true;
        v->deleter = (void *)m.deleter;
        v->t = m.dl_tensor;
    }
    return true;
}

bool ds_dlpack_check(ds_tensor_view *v, bool keep_strides, char *why, size_t why_cap)
{
    v->tensor_valid = check_tensor(v, keep_strides, why, why_cap);
    if (!v->tensor_valid)
        v->bytes = 0; /* a size computed from broken fields means nothing */
    return v->tensor_valid;
}
