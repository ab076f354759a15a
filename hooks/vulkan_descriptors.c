/*
 * vulkan_descriptors.c — what a compute dispatch writes and reads: the
 * storage and uniform buffers bound to the compute bind point through
 * descriptor sets when it is recorded (the Vulkan family's third file; vulkan_family.h says what
 * the files share).
 *
 * A shader's writes go through descriptors, so the layer follows what each
 * descriptor set holds: its layout's bindings (copied at allocation, as a
 * layout may be destroyed while its sets live), the buffers written into
 * it (vkUpdateDescriptorSets' writes and copies, and
 * vkUpdateDescriptorSetWithTemplate(KHR)'s data, read by the template's
 * entries), and the sets bound to a
 * command buffer's compute bind point with their dynamic offsets (by
 * vkCmdBindDescriptorSets, or VK_KHR_maintenance6's
 * vkCmdBindDescriptorSets2KHR where its stages include compute), or the
 * storage buffers pushed into a slot (vkCmdPushDescriptorSetKHR and its
 * maintenance6 form, and their Vulkan 1.4 core names: the writes are
 * given at recording, and a later push into the same slot updates it in
 * place; a push through a push descriptor update template,
 * vkCmdPushDescriptorSetWithTemplate(2)(KHR), is read the same way from
 * the data it gives, by the entries kept when the template was made).  A
 * dispatch then counts as a write of every storage buffer (plain, dynamic, or a storage texel buffer:
 * the bytes of its buffer view, followed from vkCreateBufferView) bound or
 * pushed, and as a read of every uniform buffer (plain or dynamic: the
 * first use of a kDLVulkan tensor on its consumer's queue): recorded into
 * the command buffer as its fills are (ds_vk_recorded_use), submitted with
 * it.
 *
 * Conservative: whether a shader only reads a storage buffer is in its
 * SPIR-V, which is not parsed, and a set bound but unused by the pipeline
 * (or disturbed by a later bind of an incompatible layout) still counts.
 * Such a buffer handed over before the dispatch is waited for is reported
 * though the shader never wrote it; a program that waits for the fence or
 * semaphore before the handoff is silent either way, its write ordered.
 *
 * Every table is bounded; what one cannot hold is unseen (it can hide a
 * race, never make one): a set, a layout or a command buffer that finds no
 * slot, a layout of more than DS_VK_LAYOUT_BINDINGS bindings, descriptors
 * past a set's first DS_VK_SET_DESCRIPTORS, dynamic offsets past a bound
 * set's first DS_VK_SET_DYNAMIC, storage buffers pushed past a command
 * buffer's first DS_VK_PUSHED.  Unseen too, and never kept stale: a
 * template not followed (of more than DS_VK_TEMPLATE_ENTRIES entries, a
 * push one of another bind point, or one that finds no slot: a set it
 * updates is forgotten, a slot it pushes into emptied), sets of
 * update-after-bind layouts (their contents are read at submission, not
 * at recording), descriptor buffers (the slot they take is emptied), a
 * buffer view that finds no slot (a storage texel buffer through it),
 * mutable descriptors.
 *
 * Wraps (vulkan_descriptors.def): vkCreateBufferView, vkDestroyBufferView,
 * vkCreateDescriptorUpdateTemplate(KHR), vkDestroyDescriptorUpdateTemplate(KHR),
 * vkCreateDescriptorSetLayout, vkDestroyDescriptorSetLayout,
 * vkAllocateDescriptorSets,
 * vkFreeDescriptorSets, vkResetDescriptorPool, vkDestroyDescriptorPool,
 * vkUpdateDescriptorSets, vkUpdateDescriptorSetWithTemplate(KHR),
 * vkCmdBindDescriptorSets, vkCmdPushDescriptorSet(KHR),
 * vkCmdBindDescriptorSets2(KHR), vkCmdPushDescriptorSet2(KHR),
 * vkCmdPushDescriptorSetWithTemplate(2)(KHR) (un-suffixed: Vulkan 1.4's core
 * names, sharing the KHR forms' handlers), vkCmdSetDescriptorBufferOffsetsEXT,
 * vkCmdDispatch, vkCmdDispatchIndirect, vkCmdDispatchBase(KHR).
 */
#include <string.h>

#include "vulkan_family.h"

#define DS_VK_LAYOUTS 1024u        /* set layouts (a power of two) */
#define DS_VK_SETS 4096u           /* descriptor sets (a power of two) */
#define DS_VK_BINDERS 4096u        /* command buffers' bound sets (a power of two) */
#define DS_VK_LAYOUT_BINDINGS 16u  /* a layout with more: its sets unseen */
#define DS_VK_SET_DESCRIPTORS 32u  /* a set's descriptors kept, in binding order */
#define DS_VK_BOUND_SETS 8u        /* compute sets followed per command buffer */
#define DS_VK_SET_DYNAMIC 8u       /* dynamic offsets kept per bound set */
#define DS_VK_PUSHED 8u            /* push descriptors followed per command buffer */
#define DS_VK_PUSH_READ 32u        /* descriptors read per write or entry of a push (a
                                    * program's count is not trusted): past it, unseen */
#define DS_VK_VIEWS 1024u          /* buffer views (a power of two) */
#define DS_VK_TEMPLATES 256u       /* push descriptor templates (a power of two) */
#define DS_VK_TEMPLATE_ENTRIES 8u  /* a template with more: its pushes unseen */

#define DELETED (~(uint64_t)0)

/* A layout's binding: its descriptors are the set's, from `first` on. */
typedef struct {
    uint32_t number, count, first;
    VkDescriptorType type;
} binding;

typedef struct {
    uint32_t n; /* bindings, by number */
    binding b[DS_VK_LAYOUT_BINDINGS];
} shape;

typedef struct {
    uint64_t handle; /* 0: free; DELETED */
    shape s;
} known_layout;

/* A buffer's bytes a descriptor gives the shader: a storage buffer's, which
 * count as written, or a uniform buffer's, read (write false). */
typedef struct {
    uint64_t buffer, offset, range; /* buffer 0: nothing known there */
    bool write;
} descriptor;

typedef struct {
    uint64_t handle; /* 0: free; DELETED */
    shape s;
    descriptor d[DS_VK_SET_DESCRIPTORS];
} known_set;

/* A storage buffer pushed into a set slot (vkCmdPushDescriptorSetKHR),
 * under the binding and array element it was written to. */
typedef struct {
    uint32_t set, number, element;
    descriptor d; /* d.buffer 0: a free entry */
} pushed;

/* The sets bound to a command buffer's compute bind point, and the
 * storage buffers pushed into the slots that hold push descriptors. */
typedef struct {
    uint64_t handle; /* the command buffer; 0: free (never deleted: Begin empties it) */
    uint64_t bound[DS_VK_BOUND_SETS];
    uint32_t dynamic[DS_VK_BOUND_SETS][DS_VK_SET_DYNAMIC];
    uint8_t dynamic_known[DS_VK_BOUND_SETS]; /* how many of dynamic[i] are known */
    uint8_t push_slots;                       /* bit i: slot i holds push descriptors */
    pushed p[DS_VK_PUSHED];
} binder;

/* A buffer view: the bytes of its buffer that a storage texel buffer
 * through it writes. */
typedef struct {
    uint64_t handle; /* 0: free; DELETED */
    descriptor d;
} known_view;

/* A push descriptor template's entries: where in the data a push gives
 * each descriptor lies (at offset + k * stride). */
typedef struct {
    uint32_t number, element, count;
    VkDescriptorType type;
    size_t offset, stride;
} template_entry;

typedef struct {
    uint64_t handle; /* 0: free; DELETED */
    uint32_t n;
    bool push; /* of push descriptors; else of a set's update */
    template_entry e[DS_VK_TEMPLATE_ENTRIES];
} known_template;

static known_template *known_templates;
static known_layout *known_layouts;
static known_set *known_sets;
static known_view *known_views;
static binder *binders;
/* Each set's pool, beside the sets (by slot): a pool reset walks these
 * 32 KiB, not the sets' 4 MiB. */
static uint64_t set_pools[DS_VK_SETS];

/* Lock held.  Open addressing over handles in a table of `n` slots of
 * `size` bytes, each starting with its handle: the slot of `handle`, or
 * (insert) a free one for it; NULL when none. */
static void *slot_of(void *table, size_t size, unsigned n, uint64_t handle, bool insert)
{
    if (!table || !handle || handle == DELETED)
        return NULL;
    char *base = table;
    uint64_t h = (handle * 0x9e3779b97f4a7c15ull) >> 32, *hole = NULL;
    for (unsigned i = 0; i < n; i++) {
        uint64_t *t = (uint64_t *)(void *)(base + size * (size_t)((h + i) & (n - 1)));
        if (*t == handle)
            return t;
        if (*t == DELETED && !hole)
            hole = t;
        if (!*t)
            return insert ? (hole ? hole : t) : NULL;
    }
    return insert ? hole : NULL;
}

/* Lock held: the tables, mapped on first use. */
static known_layout *layout_of(uint64_t handle, bool insert)
{
    if (!known_layouts && insert)
        known_layouts = ds_map(sizeof(known_layout) * DS_VK_LAYOUTS, false);
    return slot_of(known_layouts, sizeof(known_layout), DS_VK_LAYOUTS, handle, insert);
}

static known_set *set_of(uint64_t handle, bool insert)
{
    if (!known_sets && insert)
        known_sets = ds_map(sizeof(known_set) * DS_VK_SETS, false);
    return slot_of(known_sets, sizeof(known_set), DS_VK_SETS, handle, insert);
}

static binder *binder_of(uint64_t handle, bool insert)
{
    if (!binders && insert)
        binders = ds_map(sizeof(binder) * DS_VK_BINDERS, false);
    return slot_of(binders, sizeof(binder), DS_VK_BINDERS, handle, insert);
}

static known_view *view_of(uint64_t handle, bool insert)
{
    if (!known_views && insert)
        known_views = ds_map(sizeof(known_view) * DS_VK_VIEWS, false);
    return slot_of(known_views, sizeof(known_view), DS_VK_VIEWS, handle, insert);
}

static known_template *template_of(uint64_t handle, bool insert)
{
    if (!known_templates && insert)
        known_templates = ds_map(sizeof(known_template) * DS_VK_TEMPLATES, false);
    return slot_of(known_templates, sizeof(known_template), DS_VK_TEMPLATES, handle, insert);
}

static bool is_storage(VkDescriptorType type)
{
    return type == VK_DESCRIPTOR_TYPE_STORAGE_BUFFER ||
           type == VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC ||
           type == VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER;
}

/* A uniform buffer: read by the shader, a use of a kDLVulkan tensor by its
 * consumer's queue (a uniform texel buffer: not followed). */
static bool is_uniform(VkDescriptorType type)
{
    return type == VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER ||
           type == VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER_DYNAMIC;
}

/* Whether a binding's descriptors take dynamic offsets (uniform ones
 * count in their order too). */
static bool is_dynamic(VkDescriptorType type)
{
    return type == VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC ||
           type == VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER_DYNAMIC;
}

/* ---- layouts and sets -------------------------------------------------------------- */

/* A layout's bindings sorted by number, each given its first descriptor:
 * a set's descriptors are numbered in binding order, which is also the
 * order in which a write runs over into the next binding and in which
 * dynamic offsets are given.  An inline uniform block's count is bytes,
 * not descriptors: it takes none. */
static bool shape_read(const VkDescriptorSetLayoutCreateInfo *info, shape *s)
{
    if (!info || info->bindingCount > DS_VK_LAYOUT_BINDINGS ||
        (info->bindingCount && !info->pBindings) ||
        info->flags & VK_DESCRIPTOR_SET_LAYOUT_CREATE_UPDATE_AFTER_BIND_POOL_BIT)
        return false;
    *s = (shape){.n = info->bindingCount};
    for (uint32_t i = 0; i < s->n; i++) {
        const VkDescriptorSetLayoutBinding *from = &info->pBindings[i];
        binding b = {from->binding, from->descriptorCount, 0, from->descriptorType};
        if (b.type == VK_DESCRIPTOR_TYPE_INLINE_UNIFORM_BLOCK)
            b.count = 0;
        uint32_t k = i;
        for (; k > 0 && s->b[k - 1].number > b.number; k--)
            s->b[k] = s->b[k - 1];
        s->b[k] = b;
    }
    uint64_t first = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        s->b[i].first = first < DS_VK_SET_DESCRIPTORS ? (uint32_t)first : DS_VK_SET_DESCRIPTORS;
        first += s->b[i].count;
    }
    return true;
}

static void layout_created(VkDescriptorSetLayout handle,
                           const VkDescriptorSetLayoutCreateInfo *info)
{
    if (!ds_sync_enabled())
        return;
    shape s;
    bool known = shape_read(info, &s);
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    known_layout *l = layout_of(P(handle), known);
    if (l && known)
        *l = (known_layout){P(handle), s};
    else if (l) /* a handle made again, of a layout not followed */
        l->handle = DELETED;
    ds_lock_give(DS_LOCK_HOOK_TABLES);
}

static void layout_destroyed(VkDescriptorSetLayout handle)
{
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    known_layout *l = layout_of(P(handle), false);
    if (l)
        l->handle = DELETED;
    ds_lock_give(DS_LOCK_HOOK_TABLES);
}

/* Each set allocated begins empty with its layout's shape; one whose
 * layout is not followed, or that finds no slot, is unseen (an entry left
 * under its handle by a device destroyed with its pools goes). */
static void sets_allocated(const VkDescriptorSetAllocateInfo *info, const VkDescriptorSet *out)
{
    if (!ds_sync_enabled() || !info->pSetLayouts)
        return;
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    for (uint32_t i = 0; i < info->descriptorSetCount; i++) {
        const known_layout *l = layout_of(P(info->pSetLayouts[i]), false);
        known_set *s = set_of(P(out[i]), l != NULL);
        if (s && l) {
            *s = (known_set){.handle = P(out[i]), .s = l->s};
            set_pools[s - known_sets] = P(info->descriptorPool);
        } else if (s) {
            s->handle = DELETED;
        }
    }
    ds_lock_give(DS_LOCK_HOOK_TABLES);
}

static void sets_freed(uint32_t count, const VkDescriptorSet *freed)
{
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    for (uint32_t i = 0; known_sets && freed && i < count; i++) {
        known_set *s = set_of(P(freed[i]), false);
        if (s) {
            s->handle = DELETED;
            set_pools[s - known_sets] = 0;
        }
    }
    ds_lock_give(DS_LOCK_HOOK_TABLES);
}

/* A pool reset or destroyed frees its sets: a walk of the table (rare). */
static void pool_emptied(VkDescriptorPool pool)
{
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    for (unsigned i = 0; known_sets && pool && i < DS_VK_SETS; i++)
        if (set_pools[i] == P(pool)) {
            set_pools[i] = 0;
            known_sets[i].handle = DELETED;
        }
    ds_lock_give(DS_LOCK_HOOK_TABLES);
}

/* Where the k-th descriptor from (binding, element) lies in the set, a
 * write or copy running over into the following bindings as Vulkan says;
 * false past the layout's last.  *index is DS_VK_SET_DESCRIPTORS or more
 * for one not kept. */
static bool descriptor_at(const shape *s, uint32_t number, uint64_t element, uint32_t *index,
                          VkDescriptorType *type)
{
    uint32_t i = 0;
    while (i < s->n && s->b[i].number != number)
        i++;
    for (; i < s->n; i++) {
        if (element < s->b[i].count) {
            uint64_t at = (uint64_t)s->b[i].first + element;
            *index = at < DS_VK_SET_DESCRIPTORS ? (uint32_t)at : DS_VK_SET_DESCRIPTORS;
            *type = s->b[i].type;
            return true;
        }
        element -= s->b[i].count;
    }
    return false;
}

/* A buffer view made: the bytes of its buffer it covers (a handle made
 * again replaces what was kept under it). */
static void view_created(VkBufferView view, const VkBufferViewCreateInfo *info)
{
    if (!ds_sync_enabled() || !info)
        return;
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    known_view *v = view_of(P(view), true);
    if (v)
        *v = (known_view){P(view), {P(info->buffer), info->offset, info->range, true}};
    ds_lock_give(DS_LOCK_HOOK_TABLES);
}

static void view_destroyed(VkBufferView view)
{
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    known_view *v = view_of(P(view), false);
    if (v)
        v->handle = DELETED;
    ds_lock_give(DS_LOCK_HOOK_TABLES);
}

/* A storage or uniform buffer's descriptor (a write's or a template's),
 * by its type: whether the shader's use of its bytes counts as a write. */
static descriptor of_buffer(VkDescriptorType type, const VkDescriptorBufferInfo *b)
{
    return (descriptor){P(b->buffer), b->offset, b->range, is_storage(type)};
}

/* Lock held.  A storage texel buffer's: its view's bytes, or nothing ({0})
 * for a view not followed. */
static descriptor of_view(VkBufferView view)
{
    const known_view *v = view_of(P(view), false);
    return v ? v->d : (descriptor){0};
}

/* Lock held.  What the k-th descriptor of a write holds, where it is a
 * storage or uniform buffer (a storage texel buffer: its view's bytes);
 * nothing ({0}) for any other, or a view not followed. */
static descriptor written(const VkWriteDescriptorSet *w, uint32_t k)
{
    VkDescriptorType type = w->descriptorType;
    if (type == VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER)
        return w->pTexelBufferView ? of_view(w->pTexelBufferView[k]) : (descriptor){0};
    return (is_storage(type) || is_uniform(type)) && w->pBufferInfo
               ? of_buffer(type, &w->pBufferInfo[k])
               : (descriptor){0};
}

/* Lock held. */
static void write_followed(const VkWriteDescriptorSet *w)
{
    known_set *s = set_of(P(w->dstSet), false);
    if (!s || w->descriptorType == VK_DESCRIPTOR_TYPE_INLINE_UNIFORM_BLOCK)
        return;
    for (uint32_t k = 0; k < w->descriptorCount; k++) {
        uint32_t at;
        VkDescriptorType type;
        /* past the descriptors kept, so are the rest (in binding order) */
        if (!descriptor_at(&s->s, w->dstBinding, (uint64_t)w->dstArrayElement + k, &at, &type) ||
            type != w->descriptorType || at >= DS_VK_SET_DESCRIPTORS)
            return;
        s->d[at] = written(w, k);
    }
}

/* Lock held.  A descriptor copied from one not kept is not known. */
static void copy_followed(const VkCopyDescriptorSet *c)
{
    const known_set *from = set_of(P(c->srcSet), false);
    known_set *to = set_of(P(c->dstSet), false);
    for (uint32_t k = 0; to && k < c->descriptorCount; k++) {
        uint32_t src = DS_VK_SET_DESCRIPTORS, dst;
        VkDescriptorType src_type = VK_DESCRIPTOR_TYPE_MAX_ENUM, type;
        if (!descriptor_at(&to->s, c->dstBinding, (uint64_t)c->dstArrayElement + k, &dst, &type) ||
            dst >= DS_VK_SET_DESCRIPTORS)
            return;
        if (from && !descriptor_at(&from->s, c->srcBinding, (uint64_t)c->srcArrayElement + k,
                                   &src, &src_type))
            src = DS_VK_SET_DESCRIPTORS;
        to->d[dst] = src < DS_VK_SET_DESCRIPTORS && src_type == type ? from->d[src]
                                                                     : (descriptor){0};
    }
}

/* Writes in order, then copies, as the driver applies them. */
static void sets_updated(uint32_t writes, const VkWriteDescriptorSet *w, uint32_t copies,
                         const VkCopyDescriptorSet *c)
{
    if (!ds_sync_enabled())
        return;
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    for (uint32_t i = 0; known_sets && w && i < writes; i++)
        write_followed(&w[i]);
    for (uint32_t i = 0; known_sets && c && i < copies; i++)
        copy_followed(&c[i]);
    ds_lock_give(DS_LOCK_HOOK_TABLES);
}

/* ---- command buffers: what is bound, what a dispatch writes ------------------------- */

/* The command buffer begun again or reset: nothing bound (vulkan_queues.c
 * calls it with its own recording's reset). */
void ds_vk_bindings_reset(VkCommandBuffer cb)
{
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    binder *b = binder_of(P(cb), false);
    if (b)
        *b = (binder){.handle = b->handle};
    ds_lock_give(DS_LOCK_HOOK_TABLES);
}

/* How many dynamic descriptors a set's layout has, in all. */
static uint64_t dynamic_count(const shape *s)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < s->n; i++)
        if (is_dynamic(s->b[i].type))
            n += s->b[i].count;
    return n;
}

/* Lock held.  Nothing in the slot: no set, no push descriptors. */
static void slot_emptied(binder *b, uint32_t at)
{
    b->bound[at] = 0;
    b->push_slots &= (uint8_t)~(1u << at);
    for (unsigned i = 0; i < DS_VK_PUSHED; i++)
        if (b->p[i].set == at)
            b->p[i].d.buffer = 0;
}

/* Sets bound at the compute bind point from `first` on.  Dynamic offsets
 * are handed out in order of set, then of descriptor; past a set not
 * followed (how many it takes is unknown) or past the offsets given, a
 * set's dynamic buffers are unseen. */
static void sets_bound(VkCommandBuffer cb, VkPipelineBindPoint point, uint32_t first,
                       uint32_t count, const VkDescriptorSet *bound, uint32_t offsets,
                       const uint32_t *offset)
{
    if (!ds_sync_enabled() || point != VK_PIPELINE_BIND_POINT_COMPUTE || !bound)
        return;
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    binder *b = binder_of(P(cb), true);
    if (b)
        b->handle = P(cb);
    uint64_t next = 0; /* the next dynamic offset; UINT64_MAX: lost count */
    for (uint32_t i = 0; b && i < count && first + (uint64_t)i < DS_VK_BOUND_SETS; i++) {
        uint32_t at = first + i;
        slot_emptied(b, at);
        b->bound[at] = P(bound[i]);
        b->dynamic_known[at] = 0;
        const known_set *s = set_of(P(bound[i]), false);
        uint64_t n = s ? dynamic_count(&s->s) : 0;
        if (!s && bound[i]) {
            next = UINT64_MAX;
            continue;
        }
        for (uint64_t k = 0; next != UINT64_MAX && k < n && k < DS_VK_SET_DYNAMIC &&
                             offset && next + k < offsets;
             k++) {
            b->dynamic[at][k] = offset[next + k];
            b->dynamic_known[at] = (uint8_t)(k + 1);
        }
        if (next != UINT64_MAX)
            next += n;
    }
    ds_lock_give(DS_LOCK_HOOK_TABLES);
}

/* vkCmdBindDescriptorSets2KHR: as vkCmdBindDescriptorSets, for the
 * compute bind point where its stages include compute. */
static void sets_bound2(VkCommandBuffer cb, const VkBindDescriptorSetsInfoKHR *i)
{
    if (i && i->stageFlags & VK_SHADER_STAGE_COMPUTE_BIT)
        sets_bound(cb, VK_PIPELINE_BIND_POINT_COMPUTE, i->firstSet, i->descriptorSetCount,
                   i->pDescriptorSets, i->dynamicOffsetCount, i->pDynamicOffsets);
}

/* Slots of the compute bind point taken by what is not followed
 * (descriptor buffers): emptied, so that the set they replace no longer
 * counts. */
static void slots_taken(VkCommandBuffer cb, VkPipelineBindPoint point, uint32_t first,
                        uint32_t count)
{
    if (!ds_sync_enabled() || point != VK_PIPELINE_BIND_POINT_COMPUTE)
        return;
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    binder *b = binder_of(P(cb), false);
    for (uint32_t i = 0; b && i < count && first + (uint64_t)i < DS_VK_BOUND_SETS; i++)
        slot_emptied(b, first + i);
    ds_lock_give(DS_LOCK_HOOK_TABLES);
}

/* Lock held.  One descriptor pushed into slot `at`: a storage buffer kept
 * under its (binding, element), anything else forgetting what was there.
 * A write's run over into the next binding is kept under the element past
 * its binding's end (the set's layout is the pipeline layout's, not
 * followed): a later push that names the same descriptor by its own
 * binding then adds to it rather than replacing it, which counts a buffer
 * no longer there. */
static void descriptor_pushed(binder *b, uint32_t at, uint32_t number, uint32_t element,
                              descriptor d)
{
    pushed *slot = NULL, *empty = NULL;
    for (unsigned i = 0; i < DS_VK_PUSHED && !slot; i++) {
        pushed *p = &b->p[i];
        if (p->d.buffer && p->set == at && p->number == number && p->element == element)
            slot = p;
        else if (!p->d.buffer && !empty)
            empty = p;
    }
    if (!d.buffer) {
        if (slot)
            slot->d.buffer = 0;
        return;
    }
    slot = slot ? slot : empty; /* none: unseen */
    if (slot)
        *slot = (pushed){at, number, element, d};
}

/* Push descriptors written into the compute bind point's slot `set`: the
 * set it held replaced; pushes into a slot that holds push descriptors
 * already update it in place, as the driver does.  Push descriptors are
 * never dynamic. */
static void descriptors_pushed(VkCommandBuffer cb, VkPipelineBindPoint point, uint32_t set,
                               uint32_t count, const VkWriteDescriptorSet *writes)
{
    if (!ds_sync_enabled() || point != VK_PIPELINE_BIND_POINT_COMPUTE ||
        set >= DS_VK_BOUND_SETS)
        return;
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    binder *b = binder_of(P(cb), true);
    if (b) {
        b->handle = P(cb);
        if (!(b->push_slots & (1u << set)))
            slot_emptied(b, set);
        b->push_slots |= (uint8_t)(1u << set);
    }
    for (uint32_t i = 0; b && writes && i < count; i++) {
        const VkWriteDescriptorSet *w = &writes[i];
        if (w->descriptorType == VK_DESCRIPTOR_TYPE_INLINE_UNIFORM_BLOCK)
            continue; /* its count is bytes */
        for (uint32_t k = 0; k < w->descriptorCount && k < DS_VK_PUSH_READ; k++)
            descriptor_pushed(b, set, w->dstBinding, w->dstArrayElement + k, written(w, k));
    }
    ds_lock_give(DS_LOCK_HOOK_TABLES);
}

/* A template made: its entries kept, where it updates a set or pushes
 * into the compute bind point (a handle made again replaces what was kept
 * under it; another template, or one of more entries, is not followed). */
static void template_created(VkDescriptorUpdateTemplate handle,
                             const VkDescriptorUpdateTemplateCreateInfo *info)
{
    if (!ds_sync_enabled() || !info)
        return;
    bool push = info->templateType == VK_DESCRIPTOR_UPDATE_TEMPLATE_TYPE_PUSH_DESCRIPTORS_KHR;
    bool known = (push ? info->pipelineBindPoint == VK_PIPELINE_BIND_POINT_COMPUTE
                       : info->templateType == VK_DESCRIPTOR_UPDATE_TEMPLATE_TYPE_DESCRIPTOR_SET) &&
                 info->descriptorUpdateEntryCount <= DS_VK_TEMPLATE_ENTRIES &&
                 (info->pDescriptorUpdateEntries || !info->descriptorUpdateEntryCount);
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    known_template *t = template_of(P(handle), known);
    if (t && known) {
        *t = (known_template){.handle = P(handle), .n = info->descriptorUpdateEntryCount,
                              .push = push};
        for (uint32_t i = 0; i < t->n; i++) {
            const VkDescriptorUpdateTemplateEntry *e = &info->pDescriptorUpdateEntries[i];
            t->e[i] = (template_entry){e->dstBinding, e->dstArrayElement, e->descriptorCount,
                                       e->descriptorType, e->offset, e->stride};
        }
    } else if (t) {
        t->handle = DELETED;
    }
    ds_lock_give(DS_LOCK_HOOK_TABLES);
}

static void template_destroyed(VkDescriptorUpdateTemplate handle)
{
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    known_template *t = template_of(P(handle), false);
    if (t)
        t->handle = DELETED;
    ds_lock_give(DS_LOCK_HOOK_TABLES);
}

/* Lock held.  The k-th descriptor of a template entry, read from the
 * push's data (a storage or uniform buffer's VkDescriptorBufferInfo, a
 * storage texel buffer's VkBufferView): nothing ({0}) for any other type,
 * or data that cannot be read. */
static descriptor template_read(const template_entry *e, const char *data, uint32_t k)
{
    const char *at = data + e->offset + (size_t)k * e->stride;
    if (e->type == VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER) {
        VkBufferView view;
        return ds_safe_read(&view, at, sizeof(view)) == sizeof(view) ? of_view(view)
                                                                     : (descriptor){0};
    }
    VkDescriptorBufferInfo b;
    return (is_storage(e->type) || is_uniform(e->type)) &&
                   ds_safe_read(&b, at, sizeof(b)) == sizeof(b)
               ? of_buffer(e->type, &b)
               : (descriptor){0};
}

/* A set updated through a template: each entry's descriptors read from
 * `data` and written as vkUpdateDescriptorSets' writes are; a template
 * not followed forgets all the set holds. */
static void set_updated_with_template(VkDescriptorSet handle, VkDescriptorUpdateTemplate update,
                                      const void *data)
{
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    known_set *s = set_of(P(handle), false);
    const known_template *t = data && ds_sync_enabled() ? template_of(P(update), false) : NULL;
    if (s && (!t || t->push))
        memset(s->d, 0, sizeof(s->d));
    for (uint32_t i = 0; s && t && !t->push && i < t->n; i++) {
        const template_entry *e = &t->e[i];
        for (uint32_t k = 0; e->type != VK_DESCRIPTOR_TYPE_INLINE_UNIFORM_BLOCK && k < e->count;
             k++) {
            uint32_t at;
            VkDescriptorType type;
            if (!descriptor_at(&s->s, e->number, (uint64_t)e->element + k, &at, &type) ||
                type != e->type || at >= DS_VK_SET_DESCRIPTORS)
                break;
            s->d[at] = template_read(e, data, k);
        }
    }
    ds_lock_give(DS_LOCK_HOOK_TABLES);
}

/* Push descriptors given through a template: each entry's descriptors
 * read from `data` and pushed as vkCmdPushDescriptorSetKHR's writes are;
 * a template not followed empties the slot. */
static void template_pushed(VkCommandBuffer cb, VkDescriptorUpdateTemplate update, uint32_t set,
                            const void *data)
{
    if (!ds_sync_enabled() || set >= DS_VK_BOUND_SETS)
        return;
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    const known_template *t = data ? template_of(P(update), false) : NULL;
    if (t && !t->push)
        t = NULL;
    binder *b = binder_of(P(cb), t != NULL);
    if (b && !t) {
        slot_emptied(b, set);
    } else if (b) {
        b->handle = P(cb);
        if (!(b->push_slots & (1u << set)))
            slot_emptied(b, set);
        b->push_slots |= (uint8_t)(1u << set);
        for (uint32_t i = 0; i < t->n; i++) {
            const template_entry *e = &t->e[i];
            for (uint32_t k = 0; e->type != VK_DESCRIPTOR_TYPE_INLINE_UNIFORM_BLOCK &&
                                 k < e->count && k < DS_VK_PUSH_READ;
                 k++)
                descriptor_pushed(b, set, e->number, e->element + k, template_read(e, data, k));
        }
    }
    ds_lock_give(DS_LOCK_HOOK_TABLES);
}

/* vkCmdPushDescriptorSetWithTemplate2KHR: as the one-call form. */
static void template_pushed2(VkCommandBuffer cb, const VkPushDescriptorSetWithTemplateInfoKHR *i)
{
    if (i)
        template_pushed(cb, i->descriptorUpdateTemplate, i->set, i->pData);
}

/* vkCmdPushDescriptorSet2KHR: as vkCmdPushDescriptorSetKHR, for the
 * compute bind point where its stages include compute. */
static void descriptors_pushed2(VkCommandBuffer cb, const VkPushDescriptorSetInfoKHR *i)
{
    if (i && i->stageFlags & VK_SHADER_STAGE_COMPUTE_BIT)
        descriptors_pushed(cb, VK_PIPELINE_BIND_POINT_COMPUTE, i->set, i->descriptorWriteCount,
                           i->pDescriptorWrites);
}

/* Lock held.  The storage and uniform buffers of one bound set, as
 * descriptors into w[n..max); the new n. */
static unsigned set_uses(const binder *b, uint32_t at, descriptor *w, unsigned n, unsigned max)
{
    const known_set *s = set_of(b->bound[at], false);
    uint32_t dynamic = 0; /* dynamic descriptors before this one */
    for (uint32_t i = 0; s && i < s->s.n; i++) {
        const binding *bd = &s->s.b[i];
        bool dyn = is_dynamic(bd->type);
        for (uint32_t k = 0; k < bd->count && bd->first + k < DS_VK_SET_DESCRIPTORS; k++) {
            const descriptor *d = &s->d[bd->first + k];
            uint32_t nth = dyn ? dynamic++ : 0;
            if (!d->buffer || n >= max || (dyn && nth >= b->dynamic_known[at]))
                continue;
            w[n++] = (descriptor){d->buffer, d->offset + (dyn ? b->dynamic[at][nth] : 0),
                                  d->range, d->write};
        }
    }
    return n;
}

/* A dispatch recorded (`any`: it runs at least one workgroup): a write of
 * every storage buffer bound, and a read of every uniform buffer, recorded
 * into the command buffer (the writes first: where the recording is full,
 * a read is what goes unseen). */
static void dispatched(VkCommandBuffer cb, bool any)
{
    if (!any || !ds_sync_enabled())
        return;
    descriptor w[16];
    unsigned n = 0;
    ds_lock_take(DS_LOCK_HOOK_TABLES);
    const binder *b = binder_of(P(cb), false);
    for (uint32_t at = 0; b && at < DS_VK_BOUND_SETS; at++)
        if (b->bound[at] && known_sets)
            n = set_uses(b, at, w, n, (unsigned)DS_ARRAY_LEN(w));
    for (unsigned i = 0; b && i < DS_VK_PUSHED && n < DS_ARRAY_LEN(w); i++)
        if (b->p[i].d.buffer)
            w[n++] = b->p[i].d;
    ds_lock_give(DS_LOCK_HOOK_TABLES);
    for (int write = 1; write >= 0; write--)
        for (unsigned i = 0; i < n; i++)
            if (w[i].write == (bool)write)
                ds_vk_recorded_use(cb, (VkBuffer)(uintptr_t)w[i].buffer, w[i].offset,
                                   w[i].range, write);
}

/* ---- the wrappers ---------------------------------------------------------------- */
#include "vulkan_wrap.h"
#include "vulkan_descriptors.def"
#include "vulkan_forms_undef.h"

PFN_vkVoidFunction ds_vk_descriptor_wrapper(const ds_vk_device *d, const char *name)
{
#include "vulkan_lookup.h"
#include "vulkan_descriptors.def"
#include "vulkan_forms_undef.h"
    return NULL;
}
