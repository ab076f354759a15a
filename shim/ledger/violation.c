/*
 * violation.c — one place where a violation is counted, logged (with a
 * backtrace when DLSHIM_BACKTRACE asks) and acted on per DLSHIM_ON_ERROR.
 */
#include <dlfcn.h>
#include <execinfo.h>
#include <stdlib.h>
#include <string.h>

#include "ledger/ledger.h"

int ds_backtrace_capture(void **frames, int max)
{
    return backtrace(frames, max);
}

void ds_backtrace_field(ds_ev *e, void *const *frames, int n)
{
    int want = (int)ds_cfg.backtrace;
    Dl_info self;
    if (!dladdr((void *)ds_backtrace_field, &self))
        self.dli_fbase = NULL;
    ds_ev_open(e, "backtrace", '[');
    for (int i = 0, shown = 0; i < n && shown < want; i++) {
        Dl_info info;
        char frame[DS_NAME_MAX * 4];
        if (!dladdr(frames[i], &info) || !info.dli_fname) {
            ds_fmt(frame, sizeof(frame), "%p", frames[i]);
        } else {
            if (info.dli_fbase == self.dli_fbase)
                continue; /* the shim's own frames say nothing to the user */
            const char *base = strrchr(info.dli_fname, '/');
            base = base ? base + 1 : info.dli_fname;
            if (info.dli_sname && info.dli_saddr)
                ds_fmt(frame, sizeof(frame), "%s+0x%lx (%s)", info.dli_sname,
                       (unsigned long)((char *)frames[i] - (char *)info.dli_saddr), base);
            else
                ds_fmt(frame, sizeof(frame), "%s+0x%lx", *base ? base : "?",
                       (unsigned long)((char *)frames[i] - (char *)info.dli_fbase));
        }
        ds_ev_str(e, NULL, frame);
        shown++;
    }
    ds_ev_close(e);
}

static void (*last_words)(void);

void ds_violation_set_last_words(void (*fn)(void))
{
    last_words = fn;
}

bool ds_violation(int kind, const char *subject, uintptr_t addr, const char *detail)
{
    return ds_violation_with(kind, subject, addr, detail, NULL, NULL);
}

bool ds_violation_with(int kind, const char *subject, uintptr_t addr, const char *detail,
                       void (*fields)(ds_ev *e, void *arg), void *arg)
{
    ds_stats_violation(kind);
    ds_stats_last_violation(kind);
    if (ds_event_wanted(DS_EV_VIOLATION)) {
        ds_ev e;
        ds_ev_begin(&e, DS_EV_VIOLATION);
        ds_ev_str(&e, "kind", ds_violation_name(kind));
        ds_ev_hex(&e, subject, addr);
        ds_ev_str(&e, "detail", detail);
        if (fields)
            fields(&e, arg);
        if (ds_cfg.backtrace > 0) {
            void *frames[DS_BACKTRACE_CAPTURE];
            ds_backtrace_field(&e, frames, ds_backtrace_capture(frames, DS_BACKTRACE_CAPTURE));
        }
        ds_ev_py_stack(&e, (int)ds_cfg.pystack);
        ds_ev_end(&e);
    }
    switch (ds_cfg.on_error) {
    case DS_ON_ERROR_PROTECT:
        return true;
    case DS_ON_ERROR_ABORT:
        if (last_words)
            last_words();
        abort();
    default:
        return false;
    }
}
