/*
 * config.c — turns the option table (options.def) into a parser and a dump.
 *
 * The environment is read once, at start-up, straight from the envp array (no
 * getenv per event).  A value that does not parse is one warning naming the
 * variable and what it accepts; the default stays.  The first occurrence of a
 * variable wins, as with getenv.
 */
#include <stddef.h>
#include <string.h>

#include "base/base.h"

enum opt_type { T_BOOL, T_INT, T_ENUM, T_PATH, T_EVENTS, T_HOOKS, T_TEXT };

ds_config ds_cfg;

/* DLSHIM_HOOKS names: the families' own, handed down by start-up
 * (ds_config_hook_names), since the families live above this layer. */
static const char *hook_names[32];
static int nhook_names;
static uint32_t hooks_on_by_default;

void ds_config_hook_names(const char *const *names, int n, uint32_t on_by_default)
{
    nhook_names = 0;
    for (int i = 0; i < n && i < (int)DS_ARRAY_LEN(hook_names); i++)
        hook_names[nhook_names++] = names[i];
    hooks_on_by_default = on_by_default;
}

static int hook_count(void)
{
    return nhook_names;
}

typedef struct {
    const char *name; /* with the DLSHIM_ prefix */
    enum opt_type type;
    const char *def;
    int64_t lo, hi;
    const char *choices;
    size_t offset;
} opt_desc;

static const opt_desc options[] = {
#define DS_OPTION(field, NAME, TYPE, def, lo, hi, choices, doc) \
    {"DLSHIM_" #NAME, T_##TYPE, def, lo, hi, choices, offsetof(ds_config, field)},
#include "options.def"
#undef DS_OPTION
};

static const struct {
    const char *name;
    bool frequent;
} events[] = {
#define DS_EVENT(ID, name, frequent) {name, frequent},
#include "events.def"
#undef DS_EVENT
};

static const char *const violation_names[] = {
#define DS_VIOLATION(ID, name) name,
#include "violations.def"
#undef DS_VIOLATION
};

_Static_assert(DS_EV_COUNT <= 32, "events fit the DLSHIM_EVENTS bit mask");

const char *ds_event_name(int id)
{
    return id >= 0 && id < DS_EV_COUNT ? events[id].name : "?";
}

const char *ds_violation_name(int kind)
{
    return kind >= 0 && kind < DS_VIO_COUNT ? violation_names[kind] : "?";
}

/* ---- one parser per type; each returns false on a malformed value ------- */

static bool ieq(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        char x = (char)(*a >= 'A' && *a <= 'Z' ? *a + 32 : *a);
        if (x != *b)
            return false;
    }
    return *a == *b;
}

static bool parse_bool(const char *s, const opt_desc *o, signed char *out)
{
    if (*s == '\0') { /* empty: unset, where the option may be unset */
        *out = -1;
        return o->def[0] == '\0';
    }
    static const char *const yes[] = {"1", "on", "true", "yes"};
    static const char *const no[] = {"0", "off", "false", "no"};
    for (size_t i = 0; i < DS_ARRAY_LEN(yes); i++) {
        if (ieq(s, yes[i]))
            return *out = true, true;
        if (ieq(s, no[i]))
            return *out = false, true;
    }
    return false;
}

static bool parse_int(const char *s, const opt_desc *o, int64_t *out)
{
    if (*s == '\0') { /* empty: unset, where the option may be unset */
        *out = -1;
        return o->def[0] == '\0';
    }
    uint64_t v = 0;
    const char *p = s;
    if (*p < '0' || *p > '9')
        return false;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    unsigned shift = 0;
    switch (*p) {
    case 'k': case 'K': shift = 10; p++; break;
    case 'm': case 'M': shift = 20; p++; break;
    case 'g': case 'G': shift = 30; p++; break;
    default: break;
    }
    if (*p != '\0' || v > ((uint64_t)INT64_MAX >> shift))
        return false;
    v <<= shift;
    if ((int64_t)v < o->lo || (int64_t)v > o->hi)
        return false;
    *out = (int64_t)v;
    return true;
}

static bool parse_enum(const char *s, const char *choices, int *out)
{
    size_t n = strlen(s);
    int index = 0;
    for (const char *c = choices; *c; index++) {
        size_t len = strcspn(c, "|");
        if (len == n && memcmp(c, s, n) == 0)
            return *out = index, true;
        c += len + (c[len] == '|');
    }
    return false;
}

static uint32_t default_events(void)
{
    uint32_t mask = 0;
    for (int i = 0; i < DS_EV_COUNT; i++)
        if (!events[i].frequent)
            mask |= 1u << i;
    return mask;
}

static const char *hook_name(int i)
{
    return hook_names[i];
}

/* The names of a mask option's bits: how many, and how to get each. */
static int mask_names(const opt_desc *o, const char *(**name_of)(int))
{
    *name_of = o->type == T_EVENTS ? ds_event_name : hook_name;
    return o->type == T_EVENTS ? DS_EV_COUNT : hook_count();
}

/* The first name a mask option did not know, for its warning. */
static char unknown_name[64];

/* A comma list of names (each one bit of the mask), `all` or `default`:
 * DLSHIM_EVENTS and DLSHIM_HOOKS. */
static bool parse_mask(const char *s, int count, const char *(*name_of)(int), uint32_t defaults,
                       uint32_t *out)
{
    uint32_t mask = 0;
    bool any = false;
    for (const char *p = s; *p;) {
        p += strspn(p, " \t,");
        size_t len = strcspn(p, " \t,");
        if (len == 0)
            break;
        any = true;
        int id = -1;
        for (int i = 0; i < count && id < 0; i++)
            if (strlen(name_of(i)) == len && !memcmp(name_of(i), p, len))
                id = i;
        if (id >= 0)
            mask |= 1u << id;
        else if (len == 3 && !memcmp(p, "all", 3))
            mask |= (1u << count) - 1;
        else if (len == 7 && !memcmp(p, "default", 7))
            mask |= defaults;
        else {
            ds_printable(unknown_name, sizeof(unknown_name), p, len);
            return false;
        }
        p += len;
    }
    if (!any)
        return false;
    *out = mask;
    return true;
}

static bool parse_path(const char *s, char *out)
{
    size_t n = strlen(s);
    if (n == 0 || n >= DS_PATH_MAX)
        return false;
    memcpy(out, s, n + 1);
    return true;
}

static bool parse_text(const char *s, char *out)
{
    size_t n = strlen(s);
    if (n >= DS_PATH_MAX)
        return false;
    memcpy(out, s, n + 1);
    return true;
}

static bool parse(const opt_desc *o, const char *value, ds_config *c)
{
    void *field = (char *)c + o->offset;
    switch (o->type) {
    case T_BOOL: return parse_bool(value, o, field);
    case T_INT: return parse_int(value, o, field);
    case T_ENUM: return parse_enum(value, o->choices, field);
    case T_PATH: return parse_path(value, field);
    case T_EVENTS: return parse_mask(value, DS_EV_COUNT, ds_event_name, default_events(), field);
    case T_HOOKS: return parse_mask(value, hook_count(), hook_name, hooks_on_by_default, field);
    case T_TEXT: return parse_text(value, field);
    }
    return false;
}

static void expected(const opt_desc *o, char *buf, size_t cap)
{
    switch (o->type) {
    case T_BOOL:
        ds_fmt(buf, cap, "1|0|on|off|true|false|yes|no%s", o->def[0] ? "" : ", or empty for unset");
        break;
    case T_INT:
        ds_fmt(buf, cap, "an integer from %lld to %lld%s%s", (long long)o->lo, (long long)o->hi,
               o->hi >= 1024 ? ", K/M/G suffixes allowed" : "",
               o->def[0] ? "" : ", or empty for unset");
        break;
    case T_ENUM: ds_fmt(buf, cap, "%s", o->choices); break;
    case T_PATH: ds_fmt(buf, cap, "stderr, off, or a path of fewer than %d bytes", DS_PATH_MAX); break;
    case T_TEXT: ds_fmt(buf, cap, "text of fewer than %d bytes", DS_PATH_MAX); break;
    case T_EVENTS:
    case T_HOOKS: {
        const char *(*name_of)(int);
        int count = mask_names(o, &name_of);
        size_t len = ds_fmt(buf, cap, "a comma list of all, default");
        for (int i = 0; i < count; i++)
            len += ds_fmt(buf + len, cap - len, ", %s", name_of(i));
        break;
    }
    }
}

void ds_config_defaults(ds_config *c)
{
    memset(c, 0, sizeof(*c));
    for (size_t i = 0; i < DS_ARRAY_LEN(options); i++)
        if (!parse(&options[i], options[i].def, c))
            ds_diag("internal: default of %s does not parse", options[i].name);
}

/* The option an environment entry names ("DLSHIM_X=value"), or NULL after
 * writing why not (an unknown name) into `why`. */
static const opt_desc *option_of(const char *entry, size_t *index, char *why, size_t cap)
{
    size_t name_len = strcspn(entry, "=");
    for (size_t i = 0; i < DS_ARRAY_LEN(options); i++)
        if (strlen(options[i].name) == name_len && memcmp(options[i].name, entry, name_len) == 0) {
            *index = i;
            return &options[i];
        }
    char shown[80];
    ds_printable(shown, 64, entry, name_len);
    ds_fmt(why, cap, "unknown variable %s ignored; the options are listed by DLSHIM_VERBOSE=1 "
           "and in the README", shown);
    return NULL;
}

/* Parses `value` for `o` into c; false, with why, when it is not valid (the
 * default is then left in c). */
static bool parse_or_say(const opt_desc *o, const char *value, ds_config *c, char *why, size_t cap)
{
    unknown_name[0] = '\0';
    if (parse(o, value, c))
        return true;
    char want[512], which[96] = "", shown[80];
    ds_printable(shown, 64, value, SIZE_MAX);
    expected(o, want, sizeof(want));
    if (unknown_name[0])
        ds_fmt(which, sizeof(which), ": %s is not one", unknown_name);
    ds_fmt(why, cap, "%s=\"%s%s\" is not valid%s (expected %s); using the default \"%s\"",
           o->name, shown, strlen(value) > 63 ? "..." : "", which, want,
           o->def[0] ? o->def : "unset");
    parse(o, o->def, c);
    return false;
}

bool ds_config_check(const char *entry, char *why, size_t cap)
{
    size_t i;
    const opt_desc *o = option_of(entry, &i, why, cap);
    if (!o)
        return false;
    ds_config scratch;
    ds_config_defaults(&scratch);
    const char *value = entry + strcspn(entry, "=");
    return parse_or_say(o, *value ? value + 1 : "", &scratch, why, cap);
}

void ds_config_load(ds_config *c, char *const *envp)
{
    bool seen[DS_ARRAY_LEN(options)] = {false};
    ds_config_defaults(c);
    for (char *const *e = envp; e && *e; e++) {
        const char *entry = *e;
        if (strncmp(entry, "DLSHIM_", 7) != 0)
            continue;
        size_t name_len = strcspn(entry, "=");
        const char *value = entry[name_len] ? entry + name_len + 1 : "";
        size_t i = 0;
        char why[768];
        const opt_desc *o = option_of(entry, &i, why, sizeof(why));
        if (!o) {
            ds_diag("%s", why);
            continue;
        }
        if (seen[i])
            continue;
        seen[i] = true;
        if (!parse_or_say(o, value, c, why, sizeof(why)))
            ds_diag("%s", why);
    }
    /* A trace is a picture of everything: allocations, frees and copies
     * too, unless the user chose the events. */
    for (size_t i = 0; i < DS_ARRAY_LEN(options); i++)
        if (options[i].offset == offsetof(ds_config, events) && !seen[i] && c->trace[0])
            c->events = (1u << DS_EV_COUNT) - 1;
}

static void render(const opt_desc *o, const ds_config *c, char *buf, size_t cap)
{
    const void *field = (const char *)c + o->offset;
    switch (o->type) {
    case T_BOOL: {
        signed char v = *(const signed char *)field;
        ds_fmt(buf, cap, v < 0 ? "unset" : "%d", v);
        break;
    }
    case T_INT: {
        int64_t v = *(const int64_t *)field;
        if (v < 0)
            ds_fmt(buf, cap, "unset");
        else
            ds_fmt(buf, cap, "%lld", (long long)v);
        break;
    }
    case T_ENUM: {
        const char *ch = o->choices;
        for (int i = *(const int *)field; i > 0 && *ch; i--)
            ch += strcspn(ch, "|") + 1;
        size_t len = strcspn(ch, "|");
        ds_printable(buf, len + 1 < cap ? len + 1 : cap, ch, len);
        break;
    }
    case T_PATH:
    case T_TEXT: ds_printable(buf, cap, field, SIZE_MAX); break;
    case T_EVENTS:
    case T_HOOKS: {
        uint32_t mask = *(const uint32_t *)field;
        const char *(*name_of)(int);
        int count = mask_names(o, &name_of);
        size_t len = 0;
        buf[0] = '\0';
        for (int i = 0; i < count; i++)
            if (mask & (1u << i))
                len += ds_fmt(buf + len, cap - len, "%s%s", len ? "," : "", name_of(i));
        break;
    }
    }
}

void ds_config_dump(const ds_config *c)
{
    for (size_t i = 0; i < DS_ARRAY_LEN(options); i++) {
        char value[160];
        render(&options[i], c, value, sizeof(value));
        ds_diag("%-20s = %s (default: %s)", options[i].name, value,
                options[i].def[0] ? options[i].def : "unset");
    }
}
