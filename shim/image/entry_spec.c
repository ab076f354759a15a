/*
 * entry_spec.c — the grammar of DLSHIM_ENTRY / DLSHIM_ENTRY_FILE specs
 * (docs/entry-specs.md), parsed into ds_entry_spec.  A spec names a
 * function, optionally the module defining it, its argument and return
 * types, and which of them is a DLPack tensor handed over:
 *
 *     libprod.so:prod_make(i64,i64)->T@export
 *     libcons.so:cons_take(T@import,ptr)->i32
 *
 * Errors say where (the column, 1-based, in the spec) and why.
 */
#include <string.h>

#include "image/image.h"

static const struct {
    const char *name;
    int type;
} type_names[] = {
    {"void", DS_ET_VOID}, {"i8", DS_ET_I8},   {"i16", DS_ET_I16}, {"i32", DS_ET_I32},
    {"i64", DS_ET_I64},   {"u8", DS_ET_U8},   {"u16", DS_ET_U16}, {"u32", DS_ET_U32},
    {"u64", DS_ET_U64},   {"size", DS_ET_U64}, {"bool", DS_ET_BOOL}, {"f32", DS_ET_F32},
    {"f64", DS_ET_F64},   {"ptr", DS_ET_PTR}, {"str", DS_ET_STR}, {"T", DS_ET_T},
    {"V", DS_ET_V},
};

#define TYPE_LIST "void, i8, i16, i32, i64, u8, u16, u32, u64, size, bool, f32, f64, ptr, str, T, V"

typedef struct {
    const char *s;
    size_t len, pos;
    char *why;
    size_t cap;
} cursor;

static bool fail(cursor *c, size_t at, const char *what, const char *token, size_t n)
{
    char shown[40];
    ds_printable(shown, sizeof(shown), token ? token : "", token ? n : 0);
    if (token && n)
        ds_fmt(c->why, c->cap, "column %zu: %s, found '%s'", at + 1, what, shown);
    else
        ds_fmt(c->why, c->cap, "column %zu: %s", at + 1, what);
    return false;
}

static void skip_space(cursor *c)
{
    while (c->pos < c->len && (c->s[c->pos] == ' ' || c->s[c->pos] == '\t'))
        c->pos++;
}

static bool ident_char(char ch, bool first)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' ||
           (!first && ch >= '0' && ch <= '9');
}

/* A word of letters and digits at the cursor (a type or a role). */
static size_t word(cursor *c)
{
    size_t n = 0;
    while (c->pos + n < c->len && ident_char(c->s[c->pos + n], false))
        n++;
    return n;
}

static bool parse_type(cursor *c, uint8_t *type, uint8_t *role, bool is_return)
{
    skip_space(c);
    size_t at = c->pos, n = word(c);
    if (n == 0)
        return fail(c, at, is_return ? "expected a return type after '->'" : "expected a type",
                    c->s + at, c->pos < c->len ? 1 : 0);
    int t = -1;
    for (size_t i = 0; i < DS_ARRAY_LEN(type_names); i++)
        if (strlen(type_names[i].name) == n && !memcmp(type_names[i].name, c->s + at, n))
            t = type_names[i].type;
    if (t < 0) {
        char why[160];
        ds_fmt(why, sizeof(why), "unknown type (expected one of %s)", TYPE_LIST);
        return fail(c, at, why, c->s + at, n);
    }
    if (t == DS_ET_VOID && !is_return)
        return fail(c, at, "void is only a return type (write () for no arguments)", NULL, 0);
    c->pos += n;
    *type = (uint8_t)t;
    *role = DS_ER_NONE;
    skip_space(c);
    if (c->pos < c->len && c->s[c->pos] == '@') {
        c->pos++;
        skip_space(c);
        size_t role_at = c->pos;
        size_t rn = word(c);
        if (rn == 6 && !memcmp(c->s + role_at, "export", 6))
            *role = DS_ER_EXPORT;
        else if (rn == 6 && !memcmp(c->s + role_at, "import", 6))
            *role = DS_ER_IMPORT;
        else
            return fail(c, role_at, "unknown role (expected export or import)", c->s + role_at,
                        rn ? rn : (role_at < c->len ? 1 : 0));
        if (t != DS_ET_T && t != DS_ET_V)
            return fail(c, at, "a role goes with T or V (a tensor) only", c->s + at, n);
        if (is_return && *role == DS_ER_IMPORT)
            return fail(c, role_at, "a returned tensor can only be @export", NULL, 0);
        c->pos += rn;
    }
    return true;
}

bool ds_entry_parse(const char *text, size_t len, ds_entry_spec *out, char *why, size_t cap)
{
    cursor c = {text, len, 0, why, cap};
    memset(out, 0, sizeof(*out));
    out->ret_type = DS_ET_VOID;
    skip_space(&c);
    /* [module ':'] symbol */
    size_t start = c.pos;
    size_t open = start;
    while (open < len && text[open] != '(')
        open++;
    if (open == len)
        return fail(&c, len, "expected '(' after the function name", NULL, 0);
    size_t name_end = open;
    while (name_end > start && (text[name_end - 1] == ' ' || text[name_end - 1] == '\t'))
        name_end--;
    size_t colon = start;
    while (colon < name_end && text[colon] != ':')
        colon++;
    size_t sym = start;
    if (colon < name_end) {
        if (colon == start)
            return fail(&c, start, "empty module name before ':'", NULL, 0);
        if (colon - start >= sizeof(out->module))
            return fail(&c, start, "module name too long", NULL, 0);
        memcpy(out->module, text + start, colon - start);
        sym = colon + 1;
    }
    if (sym == name_end)
        return fail(&c, sym, "expected a function name", NULL, 0);
    if (name_end - sym >= sizeof(out->symbol))
        return fail(&c, sym, "function name too long", NULL, 0);
    for (size_t i = sym; i < name_end; i++)
        if (!ident_char(text[i], i == sym))
            return fail(&c, i, "a function name is letters, digits and '_' (a C or mangled name)",
                        text + i, 1);
    memcpy(out->symbol, text + sym, name_end - sym);
    /* '(' [param {',' param}] ')' */
    c.pos = open + 1;
    skip_space(&c);
    if (c.pos < len && text[c.pos] == ')') {
        c.pos++;
    } else {
        for (;;) {
            if (out->nargs == DS_ENTRY_ARGS_MAX)
                return fail(&c, c.pos, "more than 16 arguments", NULL, 0);
            if (!parse_type(&c, &out->arg_type[out->nargs], &out->arg_role[out->nargs], false))
                return false;
            out->nargs++;
            skip_space(&c);
            if (c.pos < len && text[c.pos] == ',') {
                c.pos++;
                continue;
            }
            if (c.pos < len && text[c.pos] == ')') {
                c.pos++;
                break;
            }
            return fail(&c, c.pos, "expected ',' or ')' after an argument", text + c.pos,
                        c.pos < len ? 1 : 0);
        }
    }
    /* ['->' type] */
    skip_space(&c);
    if (c.pos + 1 < len && text[c.pos] == '-' && text[c.pos + 1] == '>') {
        c.pos += 2;
        if (!parse_type(&c, &out->ret_type, &out->ret_role, true))
            return false;
        skip_space(&c);
    }
    if (c.pos != len)
        return fail(&c, c.pos, "unexpected text after the spec", text + c.pos, 1);
    return true;
}

void ds_entry_parse_list(const char *text, size_t len, bool by_lines, const char *origin,
                         void (*fn)(const ds_entry_spec *spec, void *arg), void *arg)
{
    char sep = by_lines ? '\n' : ';';
    int number = 0;
    for (size_t i = 0; i < len;) {
        size_t end = i;
        while (end < len && text[end] != sep)
            end++;
        number++;
        size_t a = i, b = end;
        if (by_lines) {
            for (size_t k = a; k < b; k++)
                if (text[k] == '#') { /* a comment to the end of the line */
                    b = k;
                    break;
                }
        }
        while (a < b && (text[a] == ' ' || text[a] == '\t' || text[a] == '\r'))
            a++;
        while (b > a && (text[b - 1] == ' ' || text[b - 1] == '\t' || text[b - 1] == '\r'))
            b--;
        if (b > a) {
            ds_entry_spec spec;
            char why[256];
            /* Columns count from the start of the line, as an editor shows
             * them, or from the first character of a ';'-separated spec. */
            size_t from = by_lines ? i : a;
            if (ds_entry_parse(text + from, b - from, &spec, why, sizeof(why))) {
                fn(&spec, arg);
            } else {
                char shown[96];
                ds_printable(shown, sizeof(shown), text + a, b - a);
                ds_diag("%s %s %d (\"%s\"): %s; this spec is ignored", origin,
                        by_lines ? "line" : "spec", number, shown, why);
            }
        }
        i = end + 1;
    }
}
