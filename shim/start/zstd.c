/*
 * zstd.c — libzstd for a log file named *.zst, loaded at run time.
 *
 * No link-time dependency: the library is opened only when DLSHIM_LOG names
 * a .zst file, past the shim's own dlopen hook, and handed to the log as
 * five function pointers (output/output.h).  A missing libzstd.so.1 (or one
 * before 1.4, without the static-context functions) leaves the log
 * uncompressed, which the log says.
 */
#include <dlfcn.h>

#include "start/start.h"

void ds_zstd_load(void)
{
    if (!ds_log_wants_zstd(ds_cfg.log))
        return;
    void *lib = ds_real_dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return;
    ds_zstd_api api = {0};
    /* Casts from void *: POSIX guarantees a dlsym result converts. */
    *(void **)&api.estimate_cctx_size = ds_real_dlsym(lib, "ZSTD_estimateCCtxSize");
    *(void **)&api.init_static_cctx = ds_real_dlsym(lib, "ZSTD_initStaticCCtx");
    *(void **)&api.compress_cctx = ds_real_dlsym(lib, "ZSTD_compressCCtx");
    *(void **)&api.compress_bound = ds_real_dlsym(lib, "ZSTD_compressBound");
    *(void **)&api.is_error = ds_real_dlsym(lib, "ZSTD_isError");
    if (api.estimate_cctx_size && api.init_static_cctx && api.compress_cctx &&
        api.compress_bound && api.is_error)
        ds_log_set_zstd(&api);
}
